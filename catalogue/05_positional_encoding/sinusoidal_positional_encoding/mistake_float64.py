# mistake: float64
# feedback: float32
# source: own

def sinusoidal_positional_encoding(max_len, d_model):
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    div = 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)
    return pe
