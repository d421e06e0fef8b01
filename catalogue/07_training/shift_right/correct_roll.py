# correct: roll
# source: own

def shift_right(tgt, bos_id):
    out = tgt.roll(1, dims=1).clone()
    out[:, 0] = bos_id
    return out
