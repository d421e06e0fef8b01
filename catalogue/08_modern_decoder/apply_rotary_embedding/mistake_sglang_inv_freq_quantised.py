# mistake: sglang inv freq quantised
# feedback: frequencies are rounded
# source: https://github.com/sgl-project/sglang-jax/issues/1472

def apply_rotary_embedding(x, positions, base=10000.0):
    d = x.size(-1)
    if d % 2:
        raise ValueError(f'the last axis must be even, got {d}')
    if positions.dim() != 1 or positions.numel() != x.size(-2):
        raise ValueError(f'positions must have shape ({x.size(-2)},)')
    inv_freq_np = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    inv_freq = inv_freq_np.to(device=x.device, dtype=x.dtype)
    freqs = torch.einsum('n,d->nd', positions.to(x.device).float(), inv_freq)  # promoted to float32
    cos, sin = freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
