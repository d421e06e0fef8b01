# mistake: triton square causal
# feedback: LAST L_q positions
# source: https://github.com/triton-lang/triton (python/tutorials/06-fused-attention.py, _attn_fwd_inner) (mask offs_m >= start_n + offs_n assumes equal lengths; cf. https://github.com/pytorch/pytorch/issues/103082)

def online_softmax_attention(query, key, value, tile_size=64, causal=False):
    if tile_size < 1:
        raise ValueError(f'tile_size must be positive, got {tile_size}')
    n_q, n_k = query.size(-2), key.size(-2)
    qk_scale = (1.0 / math.sqrt(query.size(-1))) * 1.44269504  # 1/log(2)
    m_i = torch.full(query.shape[:-1], float('-inf'), dtype=query.dtype, device=query.device)
    l_i = torch.ones(query.shape[:-1], dtype=query.dtype, device=query.device)
    acc = torch.zeros((*query.shape[:-1], value.size(-1)), dtype=query.dtype, device=query.device)
    offs_m = torch.arange(n_q, device=query.device)
    for start_n in range(0, n_k, tile_size):
        k = key[..., start_n:start_n + tile_size, :]
        v = value[..., start_n:start_n + tile_size, :]
        qk = query @ k.transpose(-2, -1)
        if causal:
            offs_n = torch.arange(start_n, start_n + k.size(-2), device=query.device)
            mask = offs_m[:, None] >= offs_n[None, :]
            qk = qk * qk_scale + torch.where(mask, 0.0, -1.0e6)
            m_ij = torch.maximum(m_i, qk.amax(-1))
            qk = qk - m_ij[..., None]
        else:
            m_ij = torch.maximum(m_i, qk.amax(-1) * qk_scale)
            qk = qk * qk_scale - m_ij[..., None]
        p = torch.exp2(qk)
        l_ij = p.sum(-1)
        alpha = torch.exp2(m_i - m_ij)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha[..., None]
        acc = acc + p @ v
        m_i = m_ij
    return acc / l_i[..., None]
