# correct: d2l permute reshape
# source: https://d2l.ai (chapters 3.6 softmax from scratch, 11.5 multi-head attention, 11.6 positional encoding)

def combine_heads(x):
    x = x.permute(0, 2, 1, 3)
    return x.reshape(x.shape[0], x.shape[1], -1)
