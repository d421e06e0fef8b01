# mistake: einsum diagonal
# feedback: takes the diagonal
# source: own

def apply_rotary_embedding(x, positions, base=10000.0):
    if x.size(-1) % 2:
        raise ValueError('d must be even')
    d = x.size(-1)
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angles = torch.einsum('i,i->i', positions.to(x.device).double(), theta)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)
