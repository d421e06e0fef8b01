# mistake: neox angles in model dtype
# feedback: angles are computed in bfloat16
# source: https://github.com/EleutherAI/gpt-neox/issues/1003; https://github.com/huggingface/transformers/issues/29496

def apply_rotary_embedding(x, positions, base=10000.0):
    d = x.size(-1)
    if d % 2:
        raise ValueError(f'the last axis must be even, got {d}')
    if positions.dim() != 1 or positions.numel() != x.size(-2):
        raise ValueError(f'positions must have shape ({x.size(-2)},)')
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device).float() / d))
    inv_freq = inv_freq.to(x.dtype)  # a buffer: .half()/.bfloat16() on the model converts it
    t = positions.to(x.device).type_as(inv_freq)
    freqs = torch.einsum('i,j->ij', t, inv_freq)
    cos, sin = freqs.cos(), freqs.sin()
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
