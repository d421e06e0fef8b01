# mistake: nanovllm inplace mul
# feedback: in-place operation
# source: https://github.com/GeeeekExplorer/nano-vllm/issues/170

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        orig_dtype = x.dtype
        x = x.float()  # the same tensor when x is already float32
        var = x.pow(2).mean(dim=-1, keepdim=True)
        x.mul_(torch.rsqrt(var + self.eps))
        x = x.to(orig_dtype).mul_(self.weight)
        return x
