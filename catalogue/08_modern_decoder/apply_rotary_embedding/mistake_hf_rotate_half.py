# mistake: hf rotate half
# feedback: rotate_half
# source: https://github.com/huggingface/transformers/issues/25199

def _rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)

def apply_rotary_embedding(x, positions, base=10000.0):
    d = x.size(-1)
    if d % 2:
        raise ValueError(f'the last axis must be even, got {d}')
    if positions.dim() != 1 or positions.numel() != x.size(-2):
        raise ValueError(f'positions must have shape ({x.size(-2)},)')
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2).float() / d))
    freqs = torch.outer(positions.float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return ((x * emb.cos()) + (_rotate_half(x) * emb.sin())).to(x.dtype)
