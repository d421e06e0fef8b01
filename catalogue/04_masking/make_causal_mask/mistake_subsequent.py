# mistake: subsequent
# feedback: FUTURE
# source: own

def make_causal_mask(size, device=None):
    return torch.ones(size, size, dtype=torch.bool, device=device).triu(1)[None, None]
