# correct: expand reshape
# source: own

def repeat_kv(x, n_rep):
    B, h, L, d = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None].expand(B, h, n_rep, L, d).reshape(B, h * n_rep, L, d)
