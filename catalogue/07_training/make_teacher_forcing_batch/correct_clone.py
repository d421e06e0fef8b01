# correct: clone
# source: own

def make_teacher_forcing_batch(tgt, pad_id):
    return tgt[:, :-1].clone(), tgt[:, 1:].contiguous()
