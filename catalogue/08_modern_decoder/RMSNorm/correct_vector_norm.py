# correct: vector norm
# source: own

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        ms = torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / x.size(-1)
        return x / (ms + self.eps).sqrt() * self.weight
