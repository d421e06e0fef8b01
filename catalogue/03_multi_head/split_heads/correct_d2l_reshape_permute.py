# correct: d2l reshape permute
# source: https://d2l.ai (chapters 3.6 softmax from scratch, 11.5 multi-head attention, 11.6 positional encoding)

def split_heads(x, num_heads):
    x = x.reshape(x.shape[0], x.shape[1], num_heads, -1)
    return x.permute(0, 2, 1, 3)
