# correct: var mean
# source: own

def layer_norm(x, weight, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
