# mistake: maxjcohen cos from one base 1000
# feedback: base
# source: https://github.com/maxjcohen/transformer/issues/62

def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError('d_model must be even')
    PE = torch.zeros((max_len, d_model))
    pos = torch.arange(max_len).unsqueeze(1)
    even = torch.arange(0, d_model, 2, dtype=torch.float32)
    odd = torch.arange(1, d_model, 2, dtype=torch.float32)
    PE[:, 0::2] = torch.sin(pos / torch.pow(1000, even / d_model))
    PE[:, 1::2] = torch.cos(pos / torch.pow(1000, odd / d_model))
    return PE
