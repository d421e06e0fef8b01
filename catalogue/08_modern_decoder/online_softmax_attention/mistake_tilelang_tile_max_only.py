# mistake: tilelang tile max only
# feedback: max(m_old
# source: https://github.com/tile-ai/tilelang/pull/1148

def online_softmax_attention(query, key, value, tile_size=64, causal=False):
    if tile_size < 1:
        raise ValueError(f'tile_size must be positive, got {tile_size}')
    n_q, n_k = query.size(-2), key.size(-2)
    scale = 1.0 / math.sqrt(query.size(-1))
    scores_max = torch.full((*query.shape[:-1], 1), float('-inf'), dtype=query.dtype, device=query.device)
    logsum = torch.zeros((*query.shape[:-1], 1), dtype=query.dtype, device=query.device)
    acc_o = torch.zeros((*query.shape[:-1], value.size(-1)), dtype=query.dtype, device=query.device)
    rows = torch.arange(n_q, device=query.device)[:, None] + (n_k - n_q)
    for start in range(0, n_k, tile_size):
        acc_s = query @ key[..., start:start + tile_size, :].transpose(-2, -1) * scale
        if causal:
            cols = torch.arange(start, start + acc_s.size(-1), device=query.device)[None, :]
            acc_s = acc_s.masked_fill(cols > rows, float('-inf'))
        scores_max_prev = scores_max
        scores_max = acc_s.amax(dim=-1, keepdim=True)  # the tile's max only
        scores_max = torch.where(torch.isinf(scores_max), scores_max_prev, scores_max)
        scores_scale = torch.exp(scores_max_prev - scores_max)
        p = torch.exp(acc_s - scores_max)
        logsum = logsum * scores_scale + p.sum(dim=-1, keepdim=True)
        acc_o = acc_o * scores_scale + p @ value[..., start:start + tile_size, :]
    return acc_o / logsum
