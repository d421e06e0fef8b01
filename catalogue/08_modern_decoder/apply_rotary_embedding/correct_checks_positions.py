# correct: checks positions
# source: own

def apply_rotary_embedding(x, positions, base=10000.0):
    if x.size(-1) % 2:
        raise ValueError('d must be even')
    d = x.size(-1)
    if positions.numel() and positions.min().item() < 0:
        raise ValueError('positions are >= 0')
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angles = positions.to(x.device).double()[:, None] * theta
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)
