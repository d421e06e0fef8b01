# correct: hkproj pr31 sqrt var eps
# source: https://github.com/hkproj/pytorch-transformer/pull/31 (the fix)

def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return weight * (x - mean) / torch.sqrt(var + eps) + bias
