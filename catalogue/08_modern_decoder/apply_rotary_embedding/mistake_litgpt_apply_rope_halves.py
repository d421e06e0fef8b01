# mistake: litgpt apply rope halves
# feedback: rotate_half
# source: https://github.com/rasbt/LLMs-from-scratch/pull/747 (litgpt's rotate-half RoPE vs Meta's interleaved weights)

def apply_rotary_embedding(x, positions, base=10000.0):
    d = x.size(-1)
    if d % 2:
        raise ValueError(f'the last axis must be even, got {d}')
    if positions.dim() != 1 or positions.numel() != x.size(-2):
        raise ValueError(f'positions must have shape ({x.size(-2)},)')
    theta = 1.0 / (base ** (torch.arange(0, d, 2).float() / d))
    idx_theta = torch.outer(positions.float(), theta).repeat(1, 2)
    cos, sin = torch.cos(idx_theta), torch.sin(idx_theta)
    head_size_half = x.size(-1) // 2
    x1 = x[..., :head_size_half]
    x2 = x[..., head_size_half:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return ((x * cos) + (rotated * sin)).to(dtype=x.dtype)
