# correct: hf sample loop
# source: https://github.com/huggingface/transformers (src/transformers/generation/utils.py, _sample loop with past_key_values) with https://github.com/huggingface/transformers (src/transformers/generation/logits_process.py, TopPLogitsWarper)
# HF's sampling loop: input_ids[:, -1:] once there is a cache, logits warped by temperature then top-p.

def _top_p_warp(scores, top_p, filter_value=-float('Inf'), min_tokens_to_keep=1):
    # ascending sort of the reversed vocabulary, stable: tied tokens rank by index, as the course asks
    sorted_logits, sorted_indices = torch.sort(scores.flip(-1), descending=False, stable=True)
    sorted_indices = scores.size(-1) - 1 - sorted_indices
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    sorted_indices_to_remove = cumulative_probs <= (1 - top_p)
    sorted_indices_to_remove[..., -min_tokens_to_keep:] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)
    return scores.masked_fill(indices_to_remove, filter_value)

@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError(f'temperature must be >= 0, got {temperature}')
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    input_ids = prompt
    past_key_values = None
    for _ in range(max_new_tokens):
        model_inputs = input_ids if past_key_values is None else input_ids[:, -1:]
        logits, past_key_values = model(model_inputs, past_key_values)
        next_token_logits = logits[:, -1, :]
        if temperature == 0:
            next_tokens = torch.argmax(next_token_logits, dim=-1)
        else:
            next_token_scores = _top_p_warp(next_token_logits / temperature, top_p)
            probs = F.softmax(next_token_scores, dim=-1)
            next_tokens = torch.multinomial(probs, num_samples=1).squeeze(1)
        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
    return input_ids
