# correct: meta llama2 start pos
# source: https://github.com/meta-llama/llama (llama/model.py: RMSNorm, apply_rotary_emb, repeat_kv, Attention, FeedForward, TransformerBlock); mask of https://github.com/meta-llama/llama/pull/900

def _precompute_freqs_cis(dim, start, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(start, end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)

def _apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)

def _repeat_kv_bshd(x, n_rep):
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim).reshape(
        bs, slen, n_kv_heads * n_rep, head_dim)

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
        bsz, seqlen, _ = x.shape
        start_pos = 0 if past_kv is None else past_kv[0].size(2)
        xq, xk, xv = self.w_q(x), self.w_k(x), self.w_v(x)
        xq = xq.view(bsz, seqlen, self.num_heads, self.d_head)
        xk = xk.view(bsz, seqlen, self.num_kv_heads, self.d_head)
        xv = xv.view(bsz, seqlen, self.num_kv_heads, self.d_head)
        freqs_cis = _precompute_freqs_cis(self.d_head, start_pos, start_pos + seqlen, self.rope_base).to(x.device)
        xq, xk = _apply_rotary_emb(xq, xk, freqs_cis)
        keys, values = xk.transpose(1, 2), xv.transpose(1, 2)  # (B, h_kv, L, dh): the course's cache layout
        if past_kv is not None:
            keys = torch.cat([past_kv[0], keys], dim=2)
            values = torch.cat([past_kv[1], values], dim=2)
        present = (keys, values)
        n_rep = self.num_heads // self.num_kv_heads
        keys = _repeat_kv_bshd(keys.transpose(1, 2), n_rep).transpose(1, 2)
        values = _repeat_kv_bshd(values.transpose(1, 2), n_rep).transpose(1, 2)
        xq = xq.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.d_head)
        mask = torch.full((seqlen, seqlen), float('-inf'), device=x.device).triu(1)
        mask = torch.hstack([torch.zeros((seqlen, start_pos), device=x.device), mask]).type_as(xq)
        scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.w_o(output), present
