# correct: view transpose
# source: own

def split_heads(x, num_heads):
    b, l, d = x.shape
    return x.view(b, l, num_heads, d // num_heads).transpose(1, 2)
