# correct: unflatten permute
# source: own

def split_heads(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)
