# mistake: llama2c positions from zero
# feedback: positions given are ignored
# source: https://github.com/huggingface/nanoVLM/pull/71 (position ids for the kv-cache: RoPE must use the offset)

def apply_rotary_embedding(x, positions, base=10000.0):
    d = x.size(-1)
    if d % 2:
        raise ValueError(f'the last axis must be even, got {d}')
    if positions.dim() != 1 or positions.numel() != x.size(-2):
        raise ValueError(f'positions must have shape ({x.size(-2)},)')
    seqlen = x.size(-2)
    freqs = 1.0 / (base ** (torch.arange(0, d, 2)[: (d // 2)].float() / d))
    t = torch.arange(seqlen)
    freqs = torch.outer(t, freqs).float()
    freqs_cos, freqs_sin = torch.cos(freqs), torch.sin(freqs)
    x_r, x_i = x.float().reshape(x.shape[:-1] + (-1, 2)).unbind(-1)
    out = torch.stack([x_r * freqs_cos - x_i * freqs_sin, x_r * freqs_sin + x_i * freqs_cos], dim=-1)
    return out.flatten(-2).type_as(x)
