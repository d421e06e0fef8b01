# mistake: ignores device
# feedback: device
# source: own

def make_causal_mask(size, device=None):
    return torch.ones(size, size, dtype=torch.bool).tril()[None, None]
