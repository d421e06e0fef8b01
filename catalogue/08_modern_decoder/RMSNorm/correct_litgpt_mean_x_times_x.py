# correct: litgpt mean x times x
# source: https://github.com/Lightning-AI/litgpt (litgpt/model.py) (RMSNorm)
# Casts the result back to x's dtype (the docstring's dtype); for half inputs the reference
# returns float32 (half times the float32 weight), so the two differ in dtype there only.

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        norm_x = torch.mean(x * x, dim=-1, keepdim=True)
        x_normed = x * torch.rsqrt(norm_x + self.eps)
        return (x_normed * self.weight.float()).to(dtype=dtype)
