# mistake: whole text with cache
# feedback: counted twice
# source: own

@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_p=1.0):
    out = prompt
    past = None
    for _ in range(max_new_tokens):
        logits, past = model(out, past)
        out = torch.cat([out, sample_next_token(logits[:, -1], temperature, top_p)[:, None]], 1)
    return out
