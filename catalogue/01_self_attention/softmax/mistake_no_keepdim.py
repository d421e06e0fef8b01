# mistake: no keepdim
# feedback: keepdim=True
# source: own

def softmax(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim)
