# mistake: hf1749 full ids with past
# feedback: counted twice
# source: https://github.com/huggingface/transformers/issues/1749

@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError(f'temperature must be >= 0, got {temperature}')
    input_ids = prompt
    past = None
    for _ in range(max_new_tokens):
        logits, past = model(input_ids, past)
        logits = logits[:, -1]
        if temperature == 0:
            next_token = logits.argmax(dim=-1)
        else:
            probs = torch.softmax(logits / temperature, dim=-1)
            next_token = torch.multinomial(probs, 1).squeeze(-1)
        input_ids = torch.cat([input_ids, next_token.view(-1, 1)], dim=1)
    return input_ids
