# correct: litgpt block
# source: https://github.com/Lightning-AI/litgpt (litgpt/model.py) (Block, non-parallel residual)

class DecoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, d_ff):
        super().__init__()
        self.attn_norm = RMSNorm(d_model)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads)
        self.ffn_norm = RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x, past_kv=None):
        x_normed = self.attn_norm(x)
        attention_output, present = self.attn(x_normed, past_kv)
        x = attention_output + x
        x = self.ffn(self.ffn_norm(x)) + x
        return x, present
