# mistake: interleaved
# feedback: every h-th feature
# source: own

def split_heads(x, num_heads):
    b, l, d = x.shape
    return x.view(b, l, d // num_heads, num_heads).permute(0, 3, 1, 2)
