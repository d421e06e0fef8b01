# mistake: sum over all
# feedback: sum of ALL entries
# source: own

def softmax(x, dim=-1):
    e = (x - x.max()).exp()
    return e / e.sum()
