# mistake: gist shift right
# feedback: top_p = 1 keeps every token
# source: https://gist.github.com/thomwolf/1a5a29f6962089e871b94cbd09daf317 (top_k_top_p_filtering), comparison made >=; filters at top_p = 1 as well
# The gist's shift-right of the removal mask, with `>=` for the course's boundary.

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)
    cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
    sorted_indices_to_remove = cumulative_probs >= top_p
    sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()
    sorted_indices_to_remove[..., 0] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)
    return logits.masked_fill(indices_to_remove, float('-inf'))
