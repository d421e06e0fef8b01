# mistake: pallas padded tile unmasked
# feedback: padded with zeros
# source: https://github.com/jax-ml/jax/issues/27224; https://github.com/66RING/tiny-flash-attention/issues/12

def online_softmax_attention(query, key, value, tile_size=64, causal=False):
    if tile_size < 1:
        raise ValueError(f'tile_size must be positive, got {tile_size}')
    n_q, n_k = query.size(-2), key.size(-2)
    pad = (-n_k) % tile_size
    if pad:  # round L_k up to a whole number of tiles
        key = F.pad(key, (0, 0, 0, pad))
        value = F.pad(value, (0, 0, 0, pad))
    scale = 1.0 / math.sqrt(query.size(-1))
    m = torch.full((*query.shape[:-1], 1), float('-inf'), dtype=query.dtype)
    l = torch.zeros_like(m)
    acc = torch.zeros((*query.shape[:-1], value.size(-1)), dtype=query.dtype)
    rows = torch.arange(n_q)[:, None] + (n_k - n_q)
    for s in range(0, key.size(-2), tile_size):
        kt, vt = key[..., s:s + tile_size, :], value[..., s:s + tile_size, :]
        sc = query @ kt.transpose(-2, -1) * scale
        if causal:
            sc = sc.masked_fill(torch.arange(s, s + tile_size)[None, :] > rows, float('-inf'))
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        c = torch.exp(m - m_safe)
        p = torch.exp(sc - m_safe)
        l = l * c + p.sum(-1, keepdim=True)
        acc = acc * c + p @ vt
        m = m_new
    return acc / l
