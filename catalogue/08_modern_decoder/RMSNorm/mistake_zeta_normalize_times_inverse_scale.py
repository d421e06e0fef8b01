# mistake: zeta normalize times inverse scale
# feedback: multiplied by 1/sqrt(d)
# source: https://github.com/kyegomez/zeta/issues/180 (zeta/nn/modules/rms_norm.py: normed * self.scale, scale = dim ** -0.5)

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        scale = x.size(-1) ** -0.5
        normed = F.normalize(x, dim=-1)
        return normed * scale * self.weight
