# correct: tril
# source: own

def make_causal_mask(size, device=None):
    return torch.tril(torch.ones(size, size, dtype=torch.bool, device=device)).view(1, 1, size, size)
