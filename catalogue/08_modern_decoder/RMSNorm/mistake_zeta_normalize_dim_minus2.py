# mistake: zeta normalize dim minus2
# feedback: over axis -2
# source: https://github.com/kyegomez/zeta/issues/180 (second point: 'the normalization should be in the dim -1, not -2')

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        normed = F.normalize(x, dim=-2)  # zeta: dim=-2
        return normed * x.size(-1) ** 0.5 * self.weight
