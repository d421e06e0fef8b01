# mistake: times temperature
# feedback: multiplied by the temperature
# source: own

def sample_next_token(logits, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError('temperature >= 0')
    if temperature == 0:
        return logits.argmax(-1)
    p = top_p_filter(logits * temperature, top_p).softmax(-1)
    return torch.multinomial(p, 1).squeeze(-1)
