# mistake: no max shift
# feedback: overflows
# source: own

def softmax(x, dim=-1):
    e = x.exp()
    return e / e.sum(dim, keepdim=True)
