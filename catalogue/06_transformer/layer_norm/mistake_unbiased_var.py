# mistake: unbiased var
# feedback: unbiased variance
# source: own

def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias
