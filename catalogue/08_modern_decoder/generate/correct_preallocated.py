# correct: preallocated
# source: own

@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_p=1.0):
    B, L0 = prompt.shape
    out = torch.empty(B, L0 + max_new_tokens, dtype=torch.long)
    out[:, :L0] = prompt
    logits, cache = model(prompt, None)
    for t in range(L0, L0 + max_new_tokens):
        out[:, t] = sample_next_token(logits[:, -1, :], temperature=temperature, top_p=top_p)
        if t + 1 < L0 + max_new_tokens:
            logits, cache = model(out[:, t:t + 1], cache)
    return out
