# mistake: sdpa is causal upper left
# feedback: not shifted
# source: https://github.com/pytorch/pytorch/issues/103082

def _rope_cache(positions, n_elem, base):
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, device=positions.device).float() / n_elem))
    idx_theta = torch.outer(positions.float(), theta)
    return torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)  # (T, hs/2, 2)

def _apply_rope_pairs(x, cache):
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    out = torch.stack([xs[..., 0] * cache[..., 0] - xs[..., 1] * cache[..., 1],
                       xs[..., 1] * cache[..., 0] + xs[..., 0] * cache[..., 1]], -1)
    return out.flatten(-2).type_as(x)

class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError('d_model must be divisible by num_heads')
        if num_heads % num_kv_heads:
            raise ValueError('num_heads must be divisible by num_kv_heads')
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.d_head = d_model // num_heads
        self.rope_base = rope_base
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.w_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, past_kv=None):
        B, T, C = x.size()
        start = 0 if past_kv is None else past_kv[0].size(2)
        input_pos = torch.arange(start, start + T, device=x.device)
        q = self.w_q(x).view(B, T, self.num_heads, self.d_head).transpose(1, 2)
        k = self.w_k(x).view(B, T, self.num_kv_heads, self.d_head).transpose(1, 2)
        v = self.w_v(x).view(B, T, self.num_kv_heads, self.d_head).transpose(1, 2)
        cache = _rope_cache(input_pos, self.d_head, self.rope_base)
        q, k = _apply_rope_pairs(q, cache), _apply_rope_pairs(k, cache)
        if past_kv is not None:
            k, v = torch.cat([past_kv[0], k], dim=2), torch.cat([past_kv[1], v], dim=2)
        present = (k, v)
        q_per_kv = self.num_heads // self.num_kv_heads
        if q_per_kv != 1:
            k = k.repeat_interleave(q_per_kv, dim=1)
            v = v.repeat_interleave(q_per_kv, dim=1)
        total = k.size(2)
        ones = torch.ones((total, total), device=x.device, dtype=torch.bool)
        mask = torch.tril(ones)[total - T:]  # rows of the T newest positions
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.0,
                                           scale=1.0 / math.sqrt(self.d_head))
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.w_o(y), present
