# mistake: no transpose
# feedback: without transposing back
# source: own

def combine_heads(x):
    b, h, l, d = x.shape
    return x.reshape(b, l, h * d)
