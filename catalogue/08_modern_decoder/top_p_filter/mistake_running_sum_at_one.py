# mistake: running sum at one
# feedback: top_p = 1 keeps every token
# source: own
# The text's rule without its exception for top_p = 1: a float32 running sum over 50,000 tokens passes 1.

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError('top_p in (0, 1]')
    v, idx = torch.sort(logits, dim=-1, descending=True, stable=True)
    p = v.softmax(-1)
    keep = (p.cumsum(-1) - p) < top_p
    return logits.masked_fill(~torch.zeros_like(keep).scatter(-1, idx, keep), float('-inf'))
