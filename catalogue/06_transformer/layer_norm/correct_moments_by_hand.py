# correct: moments by hand
# source: own

def layer_norm(x, weight, bias, eps=1e-5):
    n = x.shape[-1]
    mean = x.sum(-1, keepdim=True) / n
    var = ((x - mean) ** 2).sum(-1, keepdim=True) / n
    return weight * ((x - mean) / (var + eps).sqrt()) + bias
