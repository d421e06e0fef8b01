# correct: meta complex polar
# source: https://github.com/meta-llama/llama (llama/model.py: RMSNorm, apply_rotary_emb, repeat_kv, Attention, FeedForward, TransformerBlock) (precompute_freqs_cis, apply_rotary_emb)

def apply_rotary_embedding(x, positions, base=10000.0):
    d = x.size(-1)
    if d % 2:
        raise ValueError(f'the last axis must be even, got {d}')
    if positions.dim() != 1 or positions.numel() != x.size(-2):
        raise ValueError(f'positions must have shape ({x.size(-2)},)')
    freqs = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device)[: (d // 2)].float() / d))
    freqs = torch.outer(positions.to(freqs.device).float(), freqs)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64, (L, d/2)
    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(x_ * freqs_cis).flatten(-2).type_as(x)
