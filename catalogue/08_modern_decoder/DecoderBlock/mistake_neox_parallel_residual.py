# mistake: neox parallel residual
# feedback: parallel block
# source: https://github.com/huggingface/transformers (src/transformers/models/gpt_neox/modeling_gpt_neox.py, use_parallel_residual)

class DecoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, d_ff):
        super().__init__()
        self.attn_norm = RMSNorm(d_model)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads)
        self.ffn_norm = RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x, past_kv=None):
        attn_output, present = self.attn(self.attn_norm(x), past_kv)
        mlp_output = self.ffn(self.ffn_norm(x))
        return mlp_output + attn_output + x, present
