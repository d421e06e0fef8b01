# correct: meta float upcast
# source: https://github.com/meta-llama/llama (llama/model.py: RMSNorm, apply_rotary_emb, repeat_kv, Attention, FeedForward, TransformerBlock)

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight
