# mistake: rasbt cumsum le top p
# feedback: crosses top_p is dropped
# source: https://github.com/rasbt/reasoning-from-scratch/issues/164

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    sorted_logits, sorted_idx = torch.sort(logits, dim=-1, descending=True)
    cumprobas = torch.cumsum(torch.softmax(sorted_logits, dim=-1), dim=-1)
    keep = cumprobas <= top_p
    keep[..., 0] = True
    sorted_logits = sorted_logits.masked_fill(~keep, float('-inf'))
    return torch.full_like(logits, float('-inf')).scatter(-1, sorted_idx, sorted_logits)
