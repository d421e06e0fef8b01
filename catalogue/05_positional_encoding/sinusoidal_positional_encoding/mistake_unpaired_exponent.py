# mistake: unpaired exponent
# feedback: 2c/D
# source: https://github.com/shenweichen/DeepCTR/issues/379

def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError('d_model must be even')
    i = torch.arange(d_model, dtype=torch.float64)
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] / 10000 ** (2 * i / d_model)
    angle[:, 0::2], angle[:, 1::2] = angle[:, 0::2].sin(), angle[:, 1::2].cos()
    return angle.float()
