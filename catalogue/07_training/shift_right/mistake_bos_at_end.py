# mistake: bos at end
# feedback: appended at the end
# source: own

def shift_right(tgt, bos_id):
    return torch.cat([tgt[:, 1:], torch.full_like(tgt[:, :1], bos_id)], 1)
