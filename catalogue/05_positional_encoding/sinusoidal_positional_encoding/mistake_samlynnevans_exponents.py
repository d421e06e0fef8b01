# mistake: samlynnevans exponents
# feedback: 2c/D
# source: https://github.com/SamLynnEvans/Transformer/issues/7

def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError('d_model must be even')
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            pe[pos, i] = math.sin(pos / (10000 ** ((2 * i) / d_model)))
            pe[pos, i + 1] = math.cos(pos / (10000 ** ((2 * (i + 1)) / d_model)))
    return pe
