# correct: torch tutorial den
# source: https://pytorch.org/tutorials/beginner/translation_transformer.html

def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError('d_model must be even')
    den = torch.exp(-torch.arange(0, d_model, 2) * math.log(10000) / d_model)
    pos = torch.arange(0, max_len).reshape(max_len, 1)
    table = torch.zeros((max_len, d_model))
    table[:, 0::2] = torch.sin(pos * den)
    table[:, 1::2] = torch.cos(pos * den)
    return table
