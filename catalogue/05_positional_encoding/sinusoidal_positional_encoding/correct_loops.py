# correct: loops
# source: own

def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError('even d_model please')
    pe = torch.zeros(max_len, d_model)
    for p in range(max_len):
        for i in range(0, d_model, 2):
            pe[p, i] = math.sin(p / 10000 ** (i / d_model))
            pe[p, i + 1] = math.cos(p / 10000 ** (i / d_model))
    return pe
