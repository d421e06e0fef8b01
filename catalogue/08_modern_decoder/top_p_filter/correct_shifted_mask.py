# correct: shifted mask
# source: own
# The older Hugging Face form (top_k_top_p_filtering), with its guard for top_p = 1.

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError('top_p in (0, 1]')
    if top_p >= 1.0:
        return logits
    v, idx = torch.sort(logits, descending=True, stable=True, dim=-1)
    cum = torch.softmax(v, -1).cumsum(-1)
    drop = cum >= top_p
    drop[..., 1:] = drop[..., :-1].clone()
    drop[..., 0] = False
    out = logits.clone()
    out[drop.scatter(-1, idx, drop)] = float('-inf')
    return out
