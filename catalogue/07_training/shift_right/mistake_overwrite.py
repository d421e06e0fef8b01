# mistake: overwrite
# feedback: replaced by bos_id
# source: own

def shift_right(tgt, bos_id):
    out = tgt.clone()
    out[:, 0] = bos_id
    return out
