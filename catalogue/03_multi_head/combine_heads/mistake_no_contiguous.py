# mistake: no contiguous
# feedback: .contiguous()
# source: own

def combine_heads(x):
    b, h, l, d = x.shape
    return x.transpose(1, 2).view(b, l, h * d)
