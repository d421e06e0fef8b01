# correct: complex
# source: own

def apply_rotary_embedding(x, positions, base=10000.0):
    if x.size(-1) % 2:
        raise ValueError('d must be even')
    d = x.size(-1)
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angles = positions.to(x.device).double()[:, None] * theta
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    z = z * torch.polar(torch.ones_like(angles), angles)
    return torch.view_as_real(z).flatten(-2).to(x.dtype)
