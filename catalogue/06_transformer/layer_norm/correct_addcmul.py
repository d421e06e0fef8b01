# correct: addcmul
# source: own

def layer_norm(x, weight, bias, eps=1e-5):
    c = x - x.mean(-1, keepdim=True)
    y = c / c.square().mean(-1, keepdim=True).add(eps).sqrt()
    return torch.addcmul(bias, y, weight)
