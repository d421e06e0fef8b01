# mistake: state on cpu
# feedback: is made on the CPU
# source: own

def online_softmax_attention(query, key, value, tile_size=64, causal=False):
    if tile_size < 1:
        raise ValueError('tile_size >= 1')
    Lq, Lk = query.shape[-2], key.shape[-2]
    scale = query.shape[-1] ** -0.5
    m = torch.full(query.shape[:-1] + (1,), float('-inf'), dtype=query.dtype)
    l = torch.zeros_like(m)
    acc = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
    qpos = torch.arange(Lq)[:, None] + Lk - Lq
    for s in range(0, Lk, tile_size):
        kt, vt = key[..., s:s + tile_size, :], value[..., s:s + tile_size, :]
        sc = query @ kt.transpose(-1, -2) * scale
        if causal:
            sc = sc.masked_fill(torch.arange(s, s + kt.shape[-2], device=key.device)[None, :] > qpos, float('-inf'))
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        m_safe = torch.where(m_new == float('-inf'), torch.zeros_like(m_new), m_new)
        c = torch.exp(m - m_safe)
        p = torch.exp(sc - m_safe)
        l = l * c + p.sum(-1, keepdim=True)
        acc = acc * c + p @ vt
        m = m_new
    return acc / l
