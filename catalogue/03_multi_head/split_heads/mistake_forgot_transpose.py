# mistake: forgot transpose
# feedback: heads come before positions
# source: own

def split_heads(x, num_heads):
    b, l, d = x.shape
    return x.view(b, l, num_heads, d // num_heads)
