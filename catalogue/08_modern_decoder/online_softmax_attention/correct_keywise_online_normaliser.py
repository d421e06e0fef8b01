# correct: keywise online normaliser
# source: https://github.com/Infatoshi/physics-llm-inference (ch06/online_softmax.py, online_softmax_with_output)

def online_softmax_attention(query, key, value, tile_size=64, causal=False):
    if tile_size < 1:
        raise ValueError(f'tile_size must be positive, got {tile_size}')
    n_q, n_k = query.size(-2), key.size(-2)
    scale = 1.0 / math.sqrt(query.size(-1))
    rows = torch.arange(n_q, device=query.device) + (n_k - n_q)
    m = d = o = None
    for start in range(0, n_k, tile_size):
        x = query @ key[..., start:start + tile_size, :].transpose(-2, -1) * scale  # (..., L_q, tile)
        for j in range(x.size(-1)):
            xi = x[..., j]
            if causal:
                xi = xi.masked_fill(start + j > rows, float('-inf'))
            vi = value[..., start + j, :]
            if m is None:  # key 0, which every query sees
                m, d, o = xi.clone(), torch.ones_like(xi), vi.unsqueeze(-2).expand(*xi.shape, vi.size(-1)).clone()
                continue
            m_new = torch.maximum(m, xi)
            scale_old = torch.exp(m - m_new)
            scale_new = torch.exp(xi - m_new)
            d_new = d * scale_old + scale_new
            o = (o * (d * scale_old)[..., None] + vi.unsqueeze(-2) * scale_new[..., None]) / d_new[..., None]
            m, d = m_new, d_new
    return o
