# mistake: first position
# feedback: FIRST position
# source: own

@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_p=1.0):
    logits, past = model(prompt)
    out = prompt
    for _ in range(max_new_tokens):
        nxt = sample_next_token(logits[:, 0], temperature, top_p)
        out = torch.cat([out, nxt[:, None]], 1)
        logits, past = model(nxt[:, None], past)
    return out
