# correct: llama2c real cos sin
# source: https://github.com/karpathy/llama2.c (model.py) (precompute_freqs_cis, apply_rotary_emb)

def apply_rotary_embedding(x, positions, base=10000.0):
    d = x.size(-1)
    if d % 2:
        raise ValueError(f'the last axis must be even, got {d}')
    if positions.dim() != 1 or positions.numel() != x.size(-2):
        raise ValueError(f'positions must have shape ({x.size(-2)},)')
    freqs = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device)[: (d // 2)].float() / d))
    freqs = torch.outer(positions.to(x.device).float(), freqs).float()
    freqs_cos, freqs_sin = torch.cos(freqs), torch.sin(freqs)
    x_r, x_i = x.float().reshape(x.shape[:-1] + (-1, 2)).unbind(-1)
    out_r = x_r * freqs_cos - x_i * freqs_sin
    out_i = x_r * freqs_sin + x_i * freqs_cos
    return torch.stack([out_r, out_i], dim=-1).flatten(-2).type_as(x)
