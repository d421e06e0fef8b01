# mistake: navit normed before mlp residual
# feedback: second residual starts from ffn_norm
# source: https://github.com/Project-MONAI/MONAI/pull/9011 (review: 'Residual stream gets overwritten by the normed value before the MLP add'); https://github.com/naklecha/llama3-from-scratch/issues/28

class DecoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, d_ff):
        super().__init__()
        self.attn_norm = RMSNorm(d_model)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads)
        self.ffn_norm = RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x, past_kv=None):
        h, present = self.attn(self.attn_norm(x), past_kv)
        x = h + x
        x = self.ffn_norm(x)
        x = self.ffn(x) + x
        return x, present
