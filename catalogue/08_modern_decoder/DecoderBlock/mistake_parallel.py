# mistake: parallel
# feedback: parallel block
# source: own

class DecoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, d_ff):
        super().__init__()
        self.attn_norm = RMSNorm(d_model)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads)
        self.ffn_norm = RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x, past_kv=None):
        h, kv = self.attn(self.attn_norm(x), past_kv)
        return x + h + self.ffn(self.ffn_norm(x)), kv
