# mistake: medevalkit inverted do sample
# feedback: always taken (greedy)
# source: https://github.com/alibaba-damo-academy/MedEvalKit/pull/2

@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError(f'temperature must be >= 0, got {temperature}')
    do_sample = False if temperature else True
    logits, past = model(prompt)
    out = prompt
    for step in range(max_new_tokens):
        nxt = sample_next_token(logits[:, -1], temperature if do_sample else 0.0, top_p)
        out = torch.cat([out, nxt[:, None]], dim=1)
        logits, past = model(nxt[:, None], past)
    return out
