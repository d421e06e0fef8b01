# correct: vllm merged gate up
# source: https://github.com/vllm-project/vllm (vllm/model_executor/models/llama.py, LlamaMLP gate_up_proj + SiluAndMul)
# vLLM's merged gate_up projection and silu_and_mul (F.silu(x[..., :d]) * x[..., d:]).

class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        gate_up = F.linear(x, torch.cat([self.w1.weight, self.w3.weight], dim=0))
        d = gate_up.shape[-1] // 2
        return self.w2(F.silu(gate_up[..., :d]) * gate_up[..., d:])
