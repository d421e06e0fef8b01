# mistake: olmo eps outside sqrt
# feedback: outside the square root
# source: https://github.com/allenai/OLMo/issues/281

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        norm_x = x.norm(2, dim=-1, keepdim=True)
        rms_x = norm_x * x.size(-1) ** (-1.0 / 2)
        x_normed = x / (rms_x + self.eps)
        return self.weight * x_normed
