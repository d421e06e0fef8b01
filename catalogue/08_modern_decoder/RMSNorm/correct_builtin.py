# correct: builtin
# source: own

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return F.rms_norm(x, (x.size(-1),), self.weight, self.eps)
