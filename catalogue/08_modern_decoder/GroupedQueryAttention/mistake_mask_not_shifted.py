# mistake: mask not shifted
# feedback: not shifted
# source: own

class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError('d_model % num_heads')
        if num_heads % num_kv_heads:
            raise ValueError('num_heads % num_kv_heads')
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.d_head = d_model // num_heads
        self.rope_base = rope_base
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.w_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, past_kv=None):
        B, L, D = x.shape
        P = 0 if past_kv is None else past_kv[0].shape[2]
        q = self.w_q(x).view(B, L, self.num_heads, self.d_head).transpose(1, 2)
        k = self.w_k(x).view(B, L, self.num_kv_heads, self.d_head).transpose(1, 2)
        v = self.w_v(x).view(B, L, self.num_kv_heads, self.d_head).transpose(1, 2)
        pos = torch.arange(P, P + L, device=x.device)
        q, k = apply_rotary_embedding(q, pos, self.rope_base), apply_rotary_embedding(k, pos, self.rope_base)
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)
            v = torch.cat([past_kv[1], v], dim=2)
        n = self.num_heads // self.num_kv_heads
        s = q @ repeat_kv(k, n).transpose(-2, -1) / math.sqrt(self.d_head)
        mask = torch.ones(L, P + L, dtype=torch.bool, device=x.device).tril()
        w = s.masked_fill(~mask, float('-inf')).softmax(-1)
        out = (w @ repeat_kv(v, n)).transpose(1, 2).reshape(B, L, D)
        return self.w_o(out), (k, v)
