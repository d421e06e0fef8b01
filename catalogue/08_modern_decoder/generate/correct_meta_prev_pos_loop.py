# correct: meta prev pos loop
# source: https://github.com/meta-llama/llama (llama/generation.py: generate, sample_top_p) (sample_top_p comparison made >=)
# Meta's loop: a token buffer, prev_pos/cur_pos, the model fed tokens[prev_pos:cur_pos] and the cache.

def _sample_top_p(probs, p):
    probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True, stable=True)
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    mask = probs_sum - probs_sort >= p
    probs_sort[mask] = 0.0
    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    next_token = torch.multinomial(probs_sort, num_samples=1)
    return torch.gather(probs_idx, -1, next_token)

@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError(f'temperature must be >= 0, got {temperature}')
    bsz, prompt_len = prompt.shape
    total_len = prompt_len + max_new_tokens
    tokens = torch.zeros((bsz, total_len), dtype=torch.long, device=prompt.device)
    tokens[:, :prompt_len] = prompt
    prev_pos, past = 0, None
    for cur_pos in range(prompt_len, total_len):
        logits, past = model(tokens[:, prev_pos:cur_pos], past)
        logits = logits[:, -1]
        if temperature > 0:
            probs = torch.softmax(logits / temperature, dim=-1)
            next_token = _sample_top_p(probs, top_p)
        else:
            next_token = torch.argmax(logits, dim=-1)
        tokens[:, cur_pos] = next_token.reshape(-1)
        prev_pos = cur_pos
    return tokens
