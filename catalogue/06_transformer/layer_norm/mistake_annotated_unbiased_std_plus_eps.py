# mistake: annotated unbiased std plus eps
# feedback: (std + eps) with the unbiased std
# source: https://github.com/harvardnlp/annotated-transformer/issues/122

def layer_norm(x, weight, bias, eps=1e-6):
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, keepdim=True)
    return weight * (x - mean) / (std + eps) + bias
