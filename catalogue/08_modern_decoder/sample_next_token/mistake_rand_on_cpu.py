# mistake: rand on cpu
# feedback: is made on the CPU
# source: own

def sample_next_token(logits, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError('temperature >= 0')
    if temperature == 0:
        return logits.argmax(-1)
    p = top_p_filter(logits / temperature, top_p).softmax(-1)
    u = torch.rand(p.shape[:-1] + (1,))
    idx = torch.searchsorted(p.cumsum(-1), u).squeeze(-1)
    return idx.clamp(max=p.size(-1) - 1)
