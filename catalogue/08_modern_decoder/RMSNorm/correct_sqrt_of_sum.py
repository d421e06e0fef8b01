# correct: sqrt of sum
# source: own

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        rms = torch.sqrt(x.square().sum(-1, keepdim=True) / x.shape[-1] + self.eps)
        return self.weight * (x / rms)
