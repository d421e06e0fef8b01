# correct: query and key blocks
# source: own

def online_softmax_attention(query, key, value, tile_size=64, causal=False):
    if tile_size < 1:
        raise ValueError('tile_size >= 1')
    Lq, Lk = query.shape[-2], key.shape[-2]
    outs = []
    for qs in range(0, Lq, tile_size):
        q = query[..., qs:qs + tile_size, :]
        qpos = torch.arange(qs, qs + q.shape[-2], device=q.device)[:, None] + Lk - Lq
        m = torch.full(q.shape[:-1] + (1,), float('-inf'), dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(q.shape[:-1] + (value.shape[-1],), dtype=q.dtype, device=q.device)
        for s in range(0, Lk, tile_size):
            if causal and s > qpos.max():
                break  # the tiles after the diagonal
            kt, vt = key[..., s:s + tile_size, :], value[..., s:s + tile_size, :]
            sc = q @ kt.transpose(-1, -2) / math.sqrt(q.shape[-1])
            if causal:
                sc = sc.masked_fill(torch.arange(s, s + kt.shape[-2], device=key.device)[None, :] > qpos, float('-inf'))
            m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
            c = torch.exp(m - m_new)
            p = torch.exp(sc - m_new)
            l = l * c + p.sum(-1, keepdim=True)
            acc = acc * c + p @ vt
            m = m_new
        outs.append(acc / l)
    return torch.cat(outs, -2)
