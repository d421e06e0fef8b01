# mistake: xtransformers fpad scatter
# feedback: top_p = 1 keeps every token
# source: https://github.com/lucidrains/x-transformers (x_transformers/autoregressive_wrapper.py, generate) (top_p), comparison made >=; filters at top_p = 1 as well
# x-transformers' top_p: F.pad shifts the mask; -inf written into the sorted logits, scattered back.

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)
    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
    sorted_indices_to_remove = cum_probs >= top_p
    sorted_indices_to_remove = F.pad(sorted_indices_to_remove, (1, -1), value=False)
    sorted_logits[sorted_indices_to_remove] = float('-inf')
    return sorted_logits.scatter(-1, sorted_indices, sorted_logits)
