# mistake: length axis
# feedback: length axis
# source: own

def repeat_kv(x, n_rep):
    B, h, L, d = x.shape
    return x.repeat_interleave(n_rep, dim=2).reshape(B, h * n_rep, L, d)
