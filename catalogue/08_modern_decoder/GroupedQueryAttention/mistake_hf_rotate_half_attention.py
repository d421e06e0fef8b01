# mistake: hf rotate half attention
# feedback: rotate_half
# source: https://github.com/huggingface/transformers/issues/25199

def _rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)

def _hf_repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)

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
        bsz, q_len, _ = x.size()
        past_len = 0 if past_kv is None else past_kv[0].size(2)
        position_ids = torch.arange(past_len, past_len + q_len, device=x.device)
        query_states = self.w_q(x).view(bsz, q_len, self.num_heads, self.d_head).transpose(1, 2)
        key_states = self.w_k(x).view(bsz, q_len, self.num_kv_heads, self.d_head).transpose(1, 2)
        value_states = self.w_v(x).view(bsz, q_len, self.num_kv_heads, self.d_head).transpose(1, 2)
        inv_freq = 1.0 / (self.rope_base ** (torch.arange(0, self.d_head, 2, device=x.device).float() / self.d_head))
        freqs = torch.outer(position_ids.float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        query_states = (query_states * cos) + (_rotate_half(query_states) * sin)
        key_states = (key_states * cos) + (_rotate_half(key_states) * sin)
        if past_kv is not None:
            key_states = torch.cat([past_kv[0], key_states], dim=2)
            value_states = torch.cat([past_kv[1], value_states], dim=2)
        present = (key_states, value_states)
        n_rep = self.num_heads // self.num_kv_heads
        key_states, value_states = _hf_repeat_kv(key_states, n_rep), _hf_repeat_kv(value_states, n_rep)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.d_head)
        kv_len = key_states.size(2)
        causal = torch.ones(q_len, kv_len, dtype=torch.bool, device=x.device).tril(kv_len - q_len)
        attn_weights = attn_weights.masked_fill(~causal, torch.finfo(attn_weights.dtype).min)
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1)
        return self.w_o(attn_output), present
