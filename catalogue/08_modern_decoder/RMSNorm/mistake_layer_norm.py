# mistake: layer norm
# feedback: that is LayerNorm
# source: own

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        m = x.mean(-1, keepdim=True)
        return (x - m) / torch.sqrt((x - m).pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
