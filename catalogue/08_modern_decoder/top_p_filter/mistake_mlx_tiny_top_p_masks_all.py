# mistake: mlx tiny top p masks all
# feedback: most likely token is always in the nucleus
# source: https://github.com/ml-explore/mlx-lm/pull/1912

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    sorted_logits, sorted_indices = torch.sort(logits.flip(-1), dim=-1, stable=True)
    sorted_indices = logits.size(-1) - 1 - sorted_indices
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    keep_sorted = cumulative_probs > 1 - top_p
    keep = torch.zeros_like(keep_sorted).scatter(-1, sorted_indices, keep_sorted)
    return logits.masked_fill(~keep, float('-inf'))
