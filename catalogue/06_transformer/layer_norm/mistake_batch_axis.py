# mistake: batch axis
# feedback: first axis
# source: own

def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(0, keepdim=True)
    var = x.var(0, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
