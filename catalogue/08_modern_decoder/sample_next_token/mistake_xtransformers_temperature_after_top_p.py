# mistake: xtransformers temperature after top p
# feedback: after top_p chose
# source: https://github.com/lucidrains/x-transformers (x_transformers/autoregressive_wrapper.py, generate); fixed in HF by https://github.com/huggingface/transformers/pull/8686

def _top_p(logits, thres=0.9):
    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)
    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
    remove = F.pad(cum_probs >= thres, (1, -1), value=False)
    sorted_logits[remove] = float('-inf')
    return sorted_logits.scatter(-1, sorted_indices, sorted_logits)

def sample_next_token(logits, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError(f'temperature must be >= 0, got {temperature}')
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    if temperature == 0:
        return logits.argmax(dim=-1)
    filtered_logits = _top_p(logits, thres=top_p)
    probs = F.softmax(filtered_logits / temperature, dim=-1)
    return torch.multinomial(probs, 1).squeeze(-1)
