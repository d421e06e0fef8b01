# mistake: unstable sort
# feedback: stable
# source: own
# The text ranks ties by index; torch.sort without stable=True reorders ties in long rows (issue 39).

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError('top_p in (0, 1]')
    if top_p == 1:
        return logits
    v, idx = torch.sort(logits, dim=-1, descending=True)
    p = v.softmax(-1)
    keep = (p.cumsum(-1) - p) < top_p
    return logits.masked_fill(~torch.zeros_like(keep).scatter(-1, idx, keep), float('-inf'))
