# mistake: no transpose
# feedback: no transpose
# source: own

def split_heads(x, num_heads):
    b, l, d = x.shape
    return x.view(b, num_heads, l, d // num_heads)
