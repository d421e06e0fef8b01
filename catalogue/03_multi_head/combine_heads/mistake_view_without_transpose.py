# mistake: view without transpose
# feedback: transpose
# source: https://github.com/jsbaan/transformer-from-scratch/pull/6

def combine_heads(x):
    B, h, L, d = x.shape
    return x.reshape(B, L, h * d)
