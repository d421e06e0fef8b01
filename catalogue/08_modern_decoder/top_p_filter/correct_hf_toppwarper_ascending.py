# correct: hf toppwarper ascending
# source: https://github.com/huggingface/transformers (src/transformers/generation/logits_process.py, TopPLogitsWarper), ties ranked by index
# HF's ascending sort, made stable on the reversed vocabulary so that tied tokens rank by index.

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    sorted_logits, sorted_indices = torch.sort(logits.flip(-1), descending=False, stable=True)
    sorted_indices = logits.size(-1) - 1 - sorted_indices
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    sorted_indices_to_remove = cumulative_probs <= (1 - top_p)
    sorted_indices_to_remove[..., -1:] = 0  # min_tokens_to_keep = 1
    indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)
    return logits.masked_fill(indices_to_remove, -float('Inf'))
