# mistake: ignores dim
# feedback: although dim=
# source: own

def softmax(x, dim=-1):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)
