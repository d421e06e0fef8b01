# mistake: eps on std
# feedback: eps to the standard deviation
# source: own

def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, unbiased=False, keepdim=True)
    return (x - mean) / (std + eps) * weight + bias
