# correct: torchtune cos sin cache
# source: https://github.com/pytorch/torchtune (torchtune/modules/position_embeddings.py, RotaryPositionalEmbeddings)

def apply_rotary_embedding(x, positions, base=10000.0):
    d = x.size(-1)
    if d % 2:
        raise ValueError(f'the last axis must be even, got {d}')
    if positions.dim() != 1 or positions.numel() != x.size(-2):
        raise ValueError(f'positions must have shape ({x.size(-2)},)')
    theta = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device)[: (d // 2)].float() / d))
    idx_theta = torch.einsum('i, j -> ij', positions.to(x.device).float(), theta).float()
    rope_cache = torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)  # (L, d/2, 2)
    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)
    x_out = torch.stack([
        xshaped[..., 0] * rope_cache[..., 0] - xshaped[..., 1] * rope_cache[..., 1],
        xshaped[..., 1] * rope_cache[..., 0] + xshaped[..., 0] * rope_cache[..., 1],
    ], -1)
    return x_out.flatten(-2).type_as(x)
