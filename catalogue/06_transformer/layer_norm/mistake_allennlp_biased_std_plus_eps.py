# mistake: allennlp biased std plus eps
# feedback: eps to the standard deviation
# source: https://github.com/allenai/allennlp/pull/953

def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, unbiased=False, keepdim=True)
    return weight * (x - mean) / (std + eps) + bias
