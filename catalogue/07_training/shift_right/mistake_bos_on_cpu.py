# mistake: bos on cpu
# feedback: made on the CPU
# source: own

def shift_right(tgt, bos_id):
    bos = torch.full((tgt.size(0), 1), bos_id)
    return torch.cat([bos, tgt[:, :-1]], 1)
