# mistake: mold gemma one plus weight
# feedback: (1 + weight)
# source: https://github.com/utensils/mold/issues/1074 (RMSNorm '(w + 1)' applied to weights that already are the gain); convention: https://github.com/linkedin/Liger-Kernel/issues/74

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        output = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        output = output * (1.0 + self.weight.float())  # Gemma: weight stored as an offset from one
        return output.type_as(x)
