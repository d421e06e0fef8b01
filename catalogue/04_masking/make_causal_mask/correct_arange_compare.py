# correct: arange compare
# source: own

def make_causal_mask(size, device=None):
    i = torch.arange(size, device=device)
    return (i[None, :] <= i[:, None])[None, None]
