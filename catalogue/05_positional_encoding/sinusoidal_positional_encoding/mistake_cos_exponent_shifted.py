# mistake: cos exponent shifted
# feedback: the sin columns (0, 2, ...) are right
# source: https://github.com/maxjcohen/transformer/issues/62 (the cos exponent alone)

def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError('d_model must be even')
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    even = torch.arange(0, d_model, 2, dtype=torch.float32)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos / 10000 ** (even / d_model))
    pe[:, 1::2] = torch.cos(pos / 10000 ** ((even + 1) / d_model))
    return pe
