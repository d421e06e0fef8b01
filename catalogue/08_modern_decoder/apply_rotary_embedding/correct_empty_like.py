# correct: empty like
# source: own

def apply_rotary_embedding(x, positions, base=10000.0):
    if x.size(-1) % 2:
        raise ValueError('d must be even')
    d = x.size(-1)
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angles = positions.to(x.device).double()[:, None] * theta
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    out = torch.empty_like(x)
    out[..., ::2] = x[..., ::2] * cos - x[..., 1::2] * sin
    out[..., 1::2] = x[..., 1::2] * cos + x[..., ::2] * sin
    return out
