# mistake: table on cpu
# feedback: is made on the CPU
# source: own

def apply_rotary_embedding(x, positions, base=10000.0):
    if x.size(-1) % 2:
        raise ValueError('d must be even')
    d = x.size(-1)
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.double()[:, None] * theta
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)
