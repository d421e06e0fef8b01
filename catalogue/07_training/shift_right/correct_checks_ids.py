# correct: checks ids
# source: own
# Reads a value of the input (.item()), which the meta device cannot give: not a device mistake.

def shift_right(tgt, bos_id):
    if tgt.numel() and tgt.min().item() < 0:
        raise ValueError('token ids are >= 0')
    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], 1)
