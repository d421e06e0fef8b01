# mistake: ascending tail ties
# feedback: stable
# source: own
# The ascending sort without the flip: right except at ties, where it keeps the LATER of two equal tokens.

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError('top_p in (0, 1]')
    v, idx = logits.sort(dim=-1)
    cum = v.softmax(-1).cumsum(-1)
    drop = cum <= 1 - top_p
    drop[..., -1] = False
    return logits.masked_fill(drop.scatter(-1, idx, drop), float('-inf'))
