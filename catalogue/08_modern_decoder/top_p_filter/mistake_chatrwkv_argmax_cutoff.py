# mistake: chatrwkv argmax cutoff
# feedback: top_p = 1 keeps every token
# source: https://github.com/BlinkDL/ChatRWKV/pull/170

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    probs = F.softmax(logits.float(), dim=-1)
    sorted_probs = torch.sort(probs, dim=-1, descending=True).values
    cumulative_probs = torch.cumsum(sorted_probs, dim=-1)
    first = torch.argmax((cumulative_probs > top_p).int(), dim=-1, keepdim=True)  # np.argmax: 0 if none
    cutoff = sorted_probs.gather(-1, first)
    return logits.masked_fill(probs < cutoff, float('-inf'))
