# mistake: nanogpt divide by zero temperature
# feedback: temperature 0 means greedy
# source: https://github.com/karpathy/nanoGPT/pull/739 (fixes #738); https://github.com/turboderp/exllama/issues/226

def sample_next_token(logits, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError(f'temperature must be >= 0, got {temperature}')
    logits = logits / temperature
    probs = F.softmax(top_p_filter(logits, top_p), dim=-1)
    return torch.multinomial(probs, num_samples=1).squeeze(-1)
