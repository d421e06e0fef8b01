# correct: pow float64
# source: own

def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2 == 1:
        raise ValueError('d_model must be even')
    p = torch.arange(max_len, dtype=torch.float64)[:, None]
    i = torch.arange(d_model // 2, dtype=torch.float64)
    a = p / torch.pow(10000.0, 2 * i / d_model)
    return torch.stack([a.sin(), a.cos()], -1).flatten(1).float()
