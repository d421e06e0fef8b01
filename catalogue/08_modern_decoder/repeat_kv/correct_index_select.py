# correct: index select
# source: own

def repeat_kv(x, n_rep):
    heads = torch.arange(x.size(1) * n_rep) // n_rep
    return x.index_select(1, heads)
