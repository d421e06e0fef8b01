# correct: d2l pow
# source: https://d2l.ai (chapters 3.6 softmax from scratch, 11.5 multi-head attention, 11.6 positional encoding)

def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2 != 0:
        raise ValueError(f'odd d_model {d_model}')
    P = torch.zeros((max_len, d_model))
    X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
        10000, torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    P[:, 0::2] = torch.sin(X)
    P[:, 1::2] = torch.cos(X)
    return P
