# mistake: howuhh residual from normed
# feedback: replaces the residual stream
# source: https://github.com/Howuhh/faster-trajectory-transformer/issues/3

class DecoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, d_ff):
        super().__init__()
        self.attn_norm = RMSNorm(d_model)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads)
        self.ffn_norm = RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x, past_kv=None):
        x = self.attn_norm(x)
        h, present = self.attn(x, past_kv)
        x = x + h
        x = self.ffn_norm(x)
        return x + self.ffn(x), present
