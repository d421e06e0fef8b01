# correct: gumbel max after hf warper
# source: https://github.com/lucidrains/muse-maskgit-pytorch (muse_maskgit_pytorch.py, gumbel_sample) with https://github.com/huggingface/transformers (src/transformers/generation/logits_process.py, TopPLogitsWarper)

def _top_p_warp(scores, top_p, filter_value=-float('Inf'), min_tokens_to_keep=1):
    # ascending sort of the reversed vocabulary, stable: tied tokens rank by index, as the course asks
    sorted_logits, sorted_indices = torch.sort(scores.flip(-1), descending=False, stable=True)
    sorted_indices = scores.size(-1) - 1 - sorted_indices
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    sorted_indices_to_remove = cumulative_probs <= (1 - top_p)
    sorted_indices_to_remove[..., -min_tokens_to_keep:] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)
    return scores.masked_fill(indices_to_remove, filter_value)

def _log(t, eps=1e-20):
    return torch.log(t.clamp(min=eps))

def _gumbel_noise(t):
    noise = torch.zeros_like(t).uniform_(0, 1)
    return -_log(-_log(noise))

def sample_next_token(logits, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError(f'temperature must be >= 0, got {temperature}')
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    if temperature == 0:
        return logits.argmax(dim=-1)
    filtered = _top_p_warp(logits / temperature, top_p)
    return (filtered + _gumbel_noise(filtered)).argmax(dim=-1)
