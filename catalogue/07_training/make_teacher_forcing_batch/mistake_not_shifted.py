# mistake: not shifted
# feedback: NEXT token
# source: own

def make_teacher_forcing_batch(tgt, pad_id):
    return tgt[:, :-1], tgt[:, :-1]
