# mistake: loftr precedence
# feedback: exp(-2i)
# source: https://github.com/zju3dv/LoFTR/issues/41

def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError('d_model must be even')
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(max_len).float().unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model // 2))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe
