# mistake: mlxvlm one row sort order
# feedback: outside its own nucleus
# source: https://github.com/Blaizzy/mlx-vlm/pull/1094; code of https://github.com/ml-explore/mlx-examples (llms/mlx_lm/sample_utils.py, top_p_sampling)

def sample_next_token(logits, temperature=1.0, top_p=1.0):
    if temperature < 0:
        raise ValueError(f'temperature must be >= 0, got {temperature}')
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits * (1 / temperature), dim=-1)
    sorted_indices = torch.argsort(probs, dim=-1, stable=True)[0]  # mlx: sorted_indices.squeeze(0)
    sorted_probs = probs[..., sorted_indices]
    cumulative_probs = torch.cumsum(sorted_probs, dim=-1)
    top_probs = torch.where(cumulative_probs > 1 - top_p, sorted_probs, torch.zeros_like(sorted_probs))
    sorted_token = torch.multinomial(top_probs, num_samples=1).squeeze(-1)
    return sorted_indices[sorted_token]
