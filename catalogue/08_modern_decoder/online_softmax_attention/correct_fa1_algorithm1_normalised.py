# correct: fa1 algorithm1 normalised
# source: https://github.com/wangshankun/OpProfiling (FlashAttention/flash_attention_v1.py, FlashAttention Algorithm 1 in PyTorch)

def online_softmax_attention(query, key, value, tile_size=64, causal=False):
    if tile_size < 1:
        raise ValueError(f'tile_size must be positive, got {tile_size}')
    n_q, n_k = query.size(-2), key.size(-2)
    scale = 1.0 / math.sqrt(query.size(-1))
    O = torch.zeros((*query.shape[:-1], value.size(-1)), dtype=query.dtype, device=query.device)
    l = torch.zeros((*query.shape[:-1], 1), dtype=query.dtype, device=query.device)
    m = torch.full((*query.shape[:-1], 1), float('-inf'), dtype=query.dtype, device=query.device)
    rows = torch.arange(n_q, device=query.device)[:, None] + (n_k - n_q)
    for block_start in range(0, n_k, tile_size):
        Kj = key[..., block_start:block_start + tile_size, :]
        Vj = value[..., block_start:block_start + tile_size, :]
        Sij = query @ Kj.transpose(-2, -1) * scale
        if causal:
            cols = torch.arange(block_start, block_start + Kj.size(-2), device=query.device)[None, :]
            Sij = Sij.masked_fill(cols > rows, float('-inf'))
        mij_hat = Sij.amax(dim=-1, keepdim=True)
        # a row whose keys in this block are all masked: use 0 so that exp gives 0, not NaN
        mij_safe = torch.where(torch.isinf(mij_hat), torch.zeros_like(mij_hat), mij_hat)
        pij_hat = torch.exp(Sij - mij_safe)
        lij_hat = pij_hat.sum(dim=-1, keepdim=True)
        mi_new = torch.maximum(m, mij_hat)
        li_new = torch.exp(m - mi_new) * l + torch.exp(mij_safe - mi_new) * lij_hat
        O = (l * torch.exp(m - mi_new) * O + torch.exp(mij_safe - mi_new) * (pij_hat @ Vj)) / li_new
        l, m = li_new, mi_new
    return O
