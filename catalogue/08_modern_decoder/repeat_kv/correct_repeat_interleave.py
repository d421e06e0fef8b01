# correct: repeat interleave
# source: own

def repeat_kv(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)
