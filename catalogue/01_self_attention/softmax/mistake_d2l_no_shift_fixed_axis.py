# mistake: d2l no shift fixed axis
# feedback: raised IndexError
# source: https://d2l.ai (chapters 3.6 softmax from scratch, 11.5 multi-head attention, 11.6 positional encoding) (sums over axis 1 of a matrix, no max shift)

def softmax(X, dim=-1):
    X_exp = torch.exp(X)
    partition = X_exp.sum(1, keepdim=True)
    return X_exp / partition
