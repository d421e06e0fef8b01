# mistake: only new tokens
# feedback: only the new tokens
# source: own

@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_p=1.0):
    logits, past = model(prompt)
    new = []
    for _ in range(max_new_tokens):
        nxt = sample_next_token(logits[:, -1], temperature, top_p)
        new.append(nxt)
        logits, past = model(nxt[:, None], past)
    return torch.stack(new, 1)
