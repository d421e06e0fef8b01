# mistake: rotate half
# feedback: rotate_half
# source: own

def apply_rotary_embedding(x, positions, base=10000.0):
    if x.size(-1) % 2:
        raise ValueError('d must be even')
    d = x.size(-1)
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angles = positions.to(x.device).double()[:, None] * theta
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    h = x.size(-1) // 2
    a, b = x[..., :h], x[..., h:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
