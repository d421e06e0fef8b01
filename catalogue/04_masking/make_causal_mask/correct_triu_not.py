# correct: triu not
# source: own

def make_causal_mask(size, device=None):
    return ~torch.ones(size, size, device=device).triu(1).bool()[None, None]
