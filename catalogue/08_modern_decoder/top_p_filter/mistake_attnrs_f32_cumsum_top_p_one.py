# mistake: attnrs f32 cumsum top p one
# feedback: top_p = 1 keeps every token
# source: https://github.com/guoqingbao/attention.rs/pull/9 (cumsum rounding in top-p); form of https://github.com/lucidrains/x-transformers (autoregressive_wrapper.py, top_p)

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)
    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
    sorted_indices_to_remove = F.pad(cum_probs >= top_p, (1, -1), value=False)
    sorted_logits = sorted_logits.masked_fill(sorted_indices_to_remove, float('-inf'))
    return sorted_logits.scatter(-1, sorted_indices, sorted_logits)
