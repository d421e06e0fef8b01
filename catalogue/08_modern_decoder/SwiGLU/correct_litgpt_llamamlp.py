# correct: litgpt llamamlp
# source: https://github.com/Lightning-AI/litgpt (litgpt/model.py) (LLaMAMLP)

class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        x_fc_1 = self.w1(x)
        x_fc_2 = self.w3(x)
        x = F.silu(x_fc_1) * x_fc_2
        return self.w2(x)
