# mistake: no eps
# feedback: ignores eps
# source: own

def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / x.var(-1, unbiased=False, keepdim=True).sqrt() * weight + bias
