# correct: bkitano issue swish beta
# source: https://github.com/bkitano/llama-from-scratch/issues/7
# The version proposed in the thread: y * sigmoid(beta * y) * linear2(x), beta = 1.

class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.beta = 1.0
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        y = self.w1(x)
        return self.w2(y * torch.sigmoid(self.beta * y) * self.w3(x))
