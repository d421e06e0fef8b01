# correct: cat
# source: own

def shift_right(tgt, bos_id):
    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], 1)
