# correct: narrow
# source: own

def make_teacher_forcing_batch(tgt, pad_id):
    t = tgt.size(1) - 1
    return tgt.narrow(1, 0, t), tgt.narrow(1, 1, t)
