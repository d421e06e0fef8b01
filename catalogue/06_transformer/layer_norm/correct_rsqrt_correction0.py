# correct: rsqrt correction0
# source: own

def layer_norm(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, correction=0, keepdim=True)
    return (x - mu) * torch.rsqrt(var + eps) * weight + bias
