# mistake: veomni wrong axis
# feedback: has shape
# source: https://github.com/ByteDance-Seed/VeOmni/pull/162

def repeat_kv(x, n_rep):
    return torch.repeat_interleave(x, dim=2, repeats=n_rep)
