# mistake: returns probabilities
# feedback: probabilities are returned
# source: own

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError('top_p in (0, 1]')
    if top_p == 1:
        return logits
    v, idx = torch.sort(logits, dim=-1, descending=True, stable=True)
    p = v.softmax(-1)
    keep = (p.cumsum(-1) - p) < top_p
    return logits.softmax(-1).masked_fill(~torch.zeros_like(keep).scatter(-1, idx, keep), 0.0)
