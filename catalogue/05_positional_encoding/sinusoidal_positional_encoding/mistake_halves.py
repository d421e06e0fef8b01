# mistake: halves
# feedback: first half
# source: own

def sinusoidal_positional_encoding(max_len, d_model):
    pos = torch.arange(max_len)[:, None].float()
    div = 10000 ** (torch.arange(0, d_model, 2).float() / d_model)
    return torch.cat([torch.sin(pos / div), torch.cos(pos / div)], dim=1)
