# mistake: swapped
# feedback: swapped
# source: own

def sinusoidal_positional_encoding(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    pos = torch.arange(max_len)[:, None].float()
    div = 10000 ** (torch.arange(0, d_model, 2).float() / d_model)
    pe[:, 0::2] = torch.cos(pos / div)
    pe[:, 1::2] = torch.sin(pos / div)
    return pe
