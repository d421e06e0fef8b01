# mistake: one norm
# feedback: attn_norm is used before the feed-forward too
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
        x = x + h
        return x + self.ffn(self.attn_norm(x)), kv
