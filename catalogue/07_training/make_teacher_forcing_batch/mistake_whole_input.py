# mistake: whole input
# feedback: whole target
# source: own

def make_teacher_forcing_batch(tgt, pad_id):
    return tgt, tgt[:, 1:]
