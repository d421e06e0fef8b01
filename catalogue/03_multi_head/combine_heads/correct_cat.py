# correct: cat
# source: own

def combine_heads(x):
    return torch.cat(x.unbind(1), dim=-1)
