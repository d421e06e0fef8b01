# correct: float64 inside
# source: own

def layer_norm(x, weight, bias, eps=1e-5):
    z = x.double()
    z = z - z.mean(-1, keepdim=True)
    y = z / (z.pow(2).mean(-1, keepdim=True) + eps) ** 0.5
    return (y * weight.double() + bias.double()).to(x.dtype)
