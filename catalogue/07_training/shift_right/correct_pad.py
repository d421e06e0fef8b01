# correct: pad
# source: own

def shift_right(tgt, bos_id):
    return F.pad(tgt[:, :-1], (1, 0), value=bos_id)
