# mistake: hkproj std plus eps
# feedback: (std + eps) with the unbiased std
# source: https://github.com/hkproj/pytorch-transformer/pull/31

def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    std = x.std(dim=-1, keepdim=True)
    return weight * (x - mean) / (std + eps) + bias
