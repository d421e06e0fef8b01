# correct: contiguous view
# source: own

def combine_heads(x):
    b, h, l, d = x.shape
    return x.transpose(1, 2).contiguous().view(b, l, h * d)
