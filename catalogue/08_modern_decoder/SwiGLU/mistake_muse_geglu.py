# mistake: muse geglu
# feedback: GELU is used
# source: https://github.com/lucidrains/muse-maskgit-pytorch (muse_maskgit_pytorch.py, GEGLU: gate * F.gelu(x))

class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        x_, gate = self.w3(x), self.w1(x)
        return self.w2(F.gelu(gate) * x_)
