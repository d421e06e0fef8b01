# correct: meta sample top p
# source: https://github.com/meta-llama/llama (llama/generation.py: generate, sample_top_p), comparison made >=

def _sample_top_p(probs, p):
    probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True, stable=True)
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    mask = probs_sum - probs_sort >= p
    probs_sort[mask] = 0.0
    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    next_token = torch.multinomial(probs_sort, num_samples=1)
    return torch.gather(probs_idx, -1, next_token)

def sample_next_token(logits, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError(f'temperature must be >= 0, got {temperature}')
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    if temperature > 0:
        probs = torch.softmax(logits / temperature, dim=-1)
        next_token = _sample_top_p(probs, top_p)
    else:
        next_token = torch.argmax(logits, dim=-1)
    return next_token.reshape(-1)
