# correct: llama2c inverse cdf
# source: https://github.com/karpathy/llama2.c (run.c, sample_topp)
# run.c: sort, truncate where the cumulative probability passes topp, draw r = coin * mass and
# walk the cdf (the cutoff pre-filter (1 - topp) / (n - 1) is left out).

def sample_next_token(logits, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError(f'temperature must be >= 0, got {temperature}')
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    if temperature == 0.0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    prob_sorted, index_sorted = torch.sort(probs, dim=-1, descending=True, stable=True)
    cumulative = prob_sorted.cumsum(dim=-1)
    kept = torch.where(cumulative - prob_sorted < top_p, prob_sorted, torch.zeros_like(prob_sorted))
    cdf = kept.cumsum(dim=-1)
    coin = torch.rand(probs.shape[:-1] + (1,), device=probs.device)
    r = coin * cdf[..., -1:]
    i = torch.searchsorted(cdf, r, right=True).clamp(max=probs.size(-1) - 1)
    return index_sorted.gather(-1, i).squeeze(-1)
