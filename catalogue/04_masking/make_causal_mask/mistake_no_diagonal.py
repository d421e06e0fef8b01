# mistake: no diagonal
# feedback: diagonal
# source: own

def make_causal_mask(size, device=None):
    return torch.ones(size, size, dtype=torch.bool, device=device).tril(-1)[None, None]
