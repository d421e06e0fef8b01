# mistake: rms norm
# feedback: RMSNorm
# source: own

def layer_norm(x, weight, bias, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight + bias
