# correct: ascending tail
# source: own
# Ascending sort, as Hugging Face's TopPLogitsWarper: drop the tokens whose cumulative mass from the
# bottom is at most 1 - top_p; the row flipped before a stable sort, so that of two equal tokens the
# later one comes first from the bottom and is dropped first (ties ranked by index, as the text asks).

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError('top_p in (0, 1]')
    v, idx = logits.flip(-1).sort(dim=-1, stable=True)
    idx = logits.size(-1) - 1 - idx
    cum = v.softmax(-1).cumsum(-1)
    drop = cum <= 1 - top_p
    drop[..., -1] = False
    return logits.masked_fill(drop.scatter(-1, idx, drop), float('-inf'))
