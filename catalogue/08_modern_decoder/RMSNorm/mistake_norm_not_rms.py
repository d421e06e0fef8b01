# mistake: norm not rms
# feedback: MEAN of the squares
# source: own

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + self.eps) * self.weight
