# correct: movedim helper
# source: own

def _last(x, dim):
    return x.movedim(dim, -1)

def softmax(x, dim=-1):
    y = _last(x, dim)
    e = (y - y.max(-1, keepdim=True).values).exp()
    return (e / e.sum(-1, keepdim=True)).movedim(-1, dim)
