# mistake: left
# feedback: shifts left
# source: own

def shift_right(tgt, bos_id):
    return F.pad(tgt[:, 1:], (0, 1), value=0)
