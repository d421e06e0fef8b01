# mistake: no normalisation
# feedback: without dividing
# source: own

def softmax(x, dim=-1):
    return x.exp()
