# correct: log sum exp
# source: own

def online_softmax_attention(query, key, value, tile_size=64, causal=False):
    if tile_size < 1:
        raise ValueError('tile_size >= 1')
    scale = 1 / math.sqrt(query.size(-1))
    Lq, Lk = query.size(-2), key.size(-2)
    lse = torch.full((*query.shape[:-1], 1), float('-inf'), dtype=query.dtype, device=query.device)
    out = None
    rows = torch.arange(Lq, device=query.device)[:, None] + (Lk - Lq)
    for s in range(0, Lk, tile_size):
        sc = query @ key[..., s:s + tile_size, :].mT * scale
        if causal:
            sc = sc.masked_fill(torch.arange(s, s + sc.size(-1), device=sc.device) > rows, float('-inf'))
        tile_lse = torch.logsumexp(sc, -1, keepdim=True)
        new = torch.logaddexp(lse, tile_lse)
        part = torch.nan_to_num(torch.exp(sc - tile_lse)) @ value[..., s:s + tile_size, :]
        wa, wb = torch.nan_to_num(torch.exp(lse - new)), torch.nan_to_num(torch.exp(tile_lse - new))
        out = part * wb if out is None else out * wa + part * wb
        lse = new
    return out
