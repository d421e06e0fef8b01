# mistake: tiled
# feedback: repeated as a whole
# source: own

def repeat_kv(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)
