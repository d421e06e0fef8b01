# correct: float64 inside
# source: own

def softmax(x, dim=-1):
    z = x.double()
    z = z - z.max(dim, keepdim=True).values
    return (z.exp() / z.exp().sum(dim, keepdim=True)).to(x.dtype)
