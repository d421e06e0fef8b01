# correct: gumbel max
# source: own

def sample_next_token(logits, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError('temperature >= 0')
    if temperature == 0:
        return logits.argmax(-1)
    z = top_p_filter(logits / temperature, top_p)
    g = -torch.log(-torch.log(torch.rand_like(z).clamp_min(1e-20)))
    return (z + g).argmax(-1)
