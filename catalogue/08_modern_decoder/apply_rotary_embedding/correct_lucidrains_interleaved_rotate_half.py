# correct: lucidrains interleaved rotate half
# source: https://github.com/lucidrains/rotary-embedding-torch (rotary_embedding_torch.py, interleaved rotate_half)
# lucidrains' interleaved rotate_half ('... (d r) -> ... d r') and freqs repeated '(n r)',
# written with unflatten/repeat_interleave since einops is not installed.

def _rotate_half_interleaved(x):
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(dim=-1)
    return torch.stack((-x2, x1), dim=-1).flatten(-2)

def apply_rotary_embedding(x, positions, base=10000.0):
    d = x.size(-1)
    if d % 2:
        raise ValueError(f'the last axis must be even, got {d}')
    if positions.dim() != 1 or positions.numel() != x.size(-2):
        raise ValueError(f'positions must have shape ({x.size(-2)},)')
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device).float() / d))
    freqs = torch.einsum('i , j -> i j', positions.to(x.device).float(), inv_freq)
    freqs = freqs.repeat_interleave(2, dim=-1)  # '... n -> ... (n r)', r = 2
    out = x * freqs.cos() + _rotate_half_interleaved(x) * freqs.sin()
    return out.type(x.dtype)
