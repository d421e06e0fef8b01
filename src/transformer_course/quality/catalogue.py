"""Catalogue of correct variants and real mistakes, per exercise, as answer-cell code.

Used by tests/test_checks.py (in-process), tests/test_fairness.py and ``make bench`` (through
the real grading path, see fairness.py).

Every correct variant must pass that exercise's hidden checks; every mistake must fail
them with a message containing its `named` words. Grows with each notebook (CONTRIBUTING.md).
"""

from __future__ import annotations

# exercise -> {variant name: code}
CORRECT = {
    "softmax": {
        "amax": "def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n    return e / e.sum(dim, keepdim=True)",
        "max_values": "def softmax(x, dim=-1):\n    e = torch.exp(x - torch.max(x, dim=dim, keepdim=True)[0])\n    return e / torch.sum(e, dim=dim, keepdim=True)",
        "float64_inside": "def softmax(x, dim=-1):\n    z = x.double()\n    z = z - z.max(dim, keepdim=True).values\n    return (z.exp() / z.exp().sum(dim, keepdim=True)).to(x.dtype)",
        "logsumexp": "def softmax(x, dim=-1):\n    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))",
        "movedim_helper": "def _last(x, dim):\n    return x.movedim(dim, -1)\n\ndef softmax(x, dim=-1):\n    y = _last(x, dim)\n    e = (y - y.max(-1, keepdim=True).values).exp()\n    return (e / e.sum(-1, keepdim=True)).movedim(-1, dim)",
    },
    "attention_scores": {
        "matmul": "def attention_scores(query, key):\n    return torch.matmul(query, key.transpose(-1, -2))",
        "einsum": "def attention_scores(query, key):\n    return torch.einsum('...qd,...kd->...qk', query, key)",
        "mT": "def attention_scores(query, key):\n    return query @ key.mT",
        "broadcast_sum": "def attention_scores(query, key):\n    return (query.unsqueeze(-2) * key.unsqueeze(-3)).sum(-1)",
    },
    "self_attention": {
        "own_helpers": "def self_attention(x, w_q, w_k, w_v):\n    return softmax(attention_scores(x @ w_q, x @ w_k), dim=-1) @ (x @ w_v)",
        "builtin_softmax": "def self_attention(x, w_q, w_k, w_v):\n    return torch.softmax((x @ w_q) @ (x @ w_k).transpose(1, 2), dim=2) @ (x @ w_v)",
        "einsum": "def self_attention(x, w_q, w_k, w_v):\n    q, k, v = (torch.einsum('bld,de->ble', x, w) for w in (w_q, w_k, w_v))\n    a = F.softmax(torch.einsum('bqe,bke->bqk', q, k), -1)\n    return torch.einsum('bqk,bke->bqe', a, v)",
        "unscaled_sdpa": "def self_attention(x, w_q, w_k, w_v):\n    return F.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, scale=1.0)",
    },
    "scaled_dot_product_attention": {
        "masked_fill_nan_to_num": "def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n    w = torch.nan_to_num(torch.softmax(s, -1))\n    w = F.dropout(w, dropout_p) if dropout_p > 0 else w\n    return w @ value, w",
        "where_and_zero_rows": "def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = torch.einsum('...qd,...kd->...qk', query, key) * query.shape[-1] ** -0.5\n    if mask is not None:\n        s = torch.where(mask, s, float('-inf'))\n    w = s.softmax(-1)\n    if mask is not None:\n        w = torch.where(mask, w, 0.0)\n    w = F.dropout(w, p=dropout_p, training=True)\n    return torch.einsum('...qk,...kd->...qd', w, value), w",
        # An additive mask needs a finite fill: adding -inf gives NaN gradients on fully blocked rows.
        "additive_bias_float64": "def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    q, k = query.double(), key.double()\n    s = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5\n    if mask is not None:\n        s = s + torch.zeros(mask.shape, dtype=s.dtype).masked_fill(~mask, torch.finfo(s.dtype).min)\n    w = torch.softmax(s, -1)\n    if mask is not None:\n        w = torch.where(mask, w, torch.zeros_like(w))\n    w = w.to(query.dtype)\n    if dropout_p:\n        w = torch.nn.Dropout(dropout_p)(w)\n    return w @ value, w",
        "large_negative_then_zero": "def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(key.size(-1))\n    if mask is not None:\n        s = s.masked_fill(mask == 0, -1e9)\n    w = s.softmax(-1)\n    if mask is not None:\n        w = w * mask\n    w = F.dropout(w, dropout_p)\n    return w @ value, w",
    },
}

# exercise -> {mistake name: (code, words the feedback must contain)}
MISTAKES = {
    "softmax": {
        "no_max_shift": ("def softmax(x, dim=-1):\n    e = x.exp()\n    return e / e.sum(dim, keepdim=True)", "overflows"),
        "ignores_dim": ("def softmax(x, dim=-1):\n    e = (x - x.amax(-1, keepdim=True)).exp()\n    return e / e.sum(-1, keepdim=True)", "although dim="),
        "sum_over_all": ("def softmax(x, dim=-1):\n    e = (x - x.max()).exp()\n    return e / e.sum()", "sum of ALL entries"),
        "builtin": ("def softmax(x, dim=-1):\n    return F.softmax(x, dim=dim)", "built-in"),
        "no_keepdim": ("def softmax(x, dim=-1):\n    e = (x - x.amax(dim=dim, keepdim=True)).exp()\n    return e / e.sum(dim=dim)", "keepdim=True"),
        "no_normalisation": ("def softmax(x, dim=-1):\n    return x.exp()", "without dividing"),
    },
    "attention_scores": {
        "swapped": ("def attention_scores(query, key):\n    return key @ query.transpose(-2, -1)", "axes swapped"),
        "scaled": ("def attention_scores(query, key):\n    return query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))", "scaled by 1/sqrt(d_k)"),
        "fixed_axes": ("def attention_scores(query, key):\n    return query @ key.transpose(1, 2)", "count the axes from the end"),
        "elementwise": ("def attention_scores(query, key):\n    return (query * key).sum(-1)", "raised RuntimeError"),
    },
    "self_attention": {
        "query_axis": ("def self_attention(x, w_q, w_k, w_v):\n    return softmax(attention_scores(x @ w_q, x @ w_k), dim=1) @ (x @ w_v)", "query axis"),
        "scaled_d_k": ("def self_attention(x, w_q, w_k, w_v):\n    s = attention_scores(x @ w_q, x @ w_k) / math.sqrt(w_q.shape[1])\n    return softmax(s, -1) @ (x @ w_v)", "1/sqrt(d_k)"),
        "scaled_d_model": ("def self_attention(x, w_q, w_k, w_v):\n    s = attention_scores(x @ w_q, x @ w_k) / math.sqrt(x.shape[-1])\n    return softmax(s, -1) @ (x @ w_v)", "1/sqrt(d_model)"),
        "returns_weights": ("def self_attention(x, w_q, w_k, w_v):\n    return softmax(attention_scores(x @ w_q, x @ w_k), -1)", "returns the attention weights"),
        "batch_axis": ("def self_attention(x, w_q, w_k, w_v):\n    return softmax(attention_scores(x @ w_q, x @ w_k), dim=0) @ (x @ w_v)", "batch axis"),
    },
    "scaled_dot_product_attention": {
        "no_scale": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1)\n    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n    w = torch.nan_to_num(s.softmax(-1))\n    return w @ value, w", "WITHOUT the 1/sqrt(d_k) scale"),
        "scale_d_k": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / query.size(-1)\n    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n    w = torch.nan_to_num(s.softmax(-1))\n    return w @ value, w", "1/d_k instead of 1/sqrt(d_k)"),
        "softmax_queries": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n    w = torch.nan_to_num(s.softmax(-2))\n    return w @ value, w", "query axis"),
        # Real: F.softmax without `dim` (deprecated) takes axis 0 of 3-D scores and axis 1 of 4-D ones.
        "softmax_no_dim": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n    w = torch.nan_to_num(F.softmax(s))\n    return w @ value, w", "without dim= picks"),
        "softmax_batch_axis": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n    w = torch.nan_to_num(torch.softmax(s, dim=0))\n    return w @ value, w", "the batch axis"),
        "inverted_mask": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(mask, float('-inf'))\n    w = torch.nan_to_num(s.softmax(-1))\n    return w @ value, w", "mask is inverted"),
        "ignores_mask": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    w = (query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))).softmax(-1)\n    return w @ value, w", "mask is ignored"),
        "nan_rows": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n    w = s.softmax(-1)\n    return w @ value, w", "NaN"),
        "uniform_rows": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(~mask, -1e9)\n    w = s.softmax(-1)\n    return w @ value, w", "-1e9"),
        "dropout_not_rescaled": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n    w = torch.nan_to_num(s.softmax(-1))\n    if dropout_p > 0:\n        w = w * (torch.rand_like(w) > dropout_p)\n    return w @ value, w", "1/(1 - p)"),
        "additive_inf_nan_to_num": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s + torch.zeros(mask.shape, dtype=s.dtype).masked_fill(~mask, float('-inf'))\n    w = torch.nan_to_num(s.softmax(-1))\n    if dropout_p > 0:\n        w = F.dropout(w, dropout_p)\n    return w @ value, w", "instead of adding -inf"),
        "weights_before_dropout": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n    w = torch.nan_to_num(s.softmax(-1))\n    return F.dropout(w, dropout_p) @ value, w", "weights after dropout"),
        "dropout_ignored": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n    w = torch.nan_to_num(s.softmax(-1))\n    return w @ value, w", "changed nothing"),
    },
}

# Which hidden checks grade each exercise: (module, function names).
CHECKS = {
    "softmax": ("nb01", ["check_softmax"]),
    "attention_scores": ("nb01", ["check_attention_scores"]),
    "self_attention": ("nb01", ["check_self_attention"]),
    "scaled_dot_product_attention": ("nb02", ["check_values", "check_mask", "check_fully_masked", "check_dropout"]),
}

# ----------------------------------------------------------------- notebooks 03-05
MHA_INIT = (
    "class MultiHeadAttention(nn.Module):\n"
    "    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):\n"
    "        super().__init__()\n"
    "        if d_model % num_heads != 0:\n"
    "            raise ValueError('d_model must be divisible by num_heads')\n"
    "        self.num_heads, self.dropout = num_heads, dropout\n"
    "        self.w_q = nn.Linear(d_model, d_model, bias=bias)\n"
    "        self.w_k = nn.Linear(d_model, d_model, bias=bias)\n"
    "        self.w_v = nn.Linear(d_model, d_model, bias=bias)\n"
    "        self.w_o = nn.Linear(d_model, d_model, bias=bias)\n\n"
    "    def forward(self, query, key, value, mask=None):\n"
)
MHA_OK = MHA_INIT + (
    "        h = self.num_heads\n"
    "        q, k, v = split_heads(self.w_q(query), h), split_heads(self.w_k(key), h), split_heads(self.w_v(value), h)\n"
    "        out, w = scaled_dot_product_attention(q, k, v, mask=mask, dropout_p=self.dropout if self.training else 0.0)\n"
    "        return self.w_o(combine_heads(out)), w\n"
)
PE_INIT = (
    "class PositionalEncoding(nn.Module):\n"
    "    def __init__(self, d_model, dropout=0.1, max_len=5000):\n"
    "        super().__init__()\n"
    "        self.dropout = nn.Dropout(dropout)\n"
    "        self.max_len = max_len\n"
)
PE_FORWARD_OK = (
    "    def forward(self, x):\n"
    "        if x.size(1) > self.max_len:\n"
    "            raise ValueError(f'length {x.size(1)} > max_len {self.max_len}')\n"
    "        return self.dropout(x + self.pe[: x.size(1)])\n"
)
EMB = "class TokenEmbedding(nn.Module):\n    def __init__(self, vocab_size, d_model):\n        super().__init__()\n        self.embedding = nn.Embedding(vocab_size, d_model)\n        self.d_model = d_model\n\n    def forward(self, tokens):\n"

CORRECT.update({
    "split_heads": {
        "view_transpose": "def split_heads(x, num_heads):\n    b, l, d = x.shape\n    return x.view(b, l, num_heads, d // num_heads).transpose(1, 2)",
        "unflatten_permute": "def split_heads(x, num_heads):\n    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)",
        "chunk_stack": "def split_heads(x, num_heads):\n    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)",
    },
    "combine_heads": {
        "contiguous_view": "def combine_heads(x):\n    b, h, l, d = x.shape\n    return x.transpose(1, 2).contiguous().view(b, l, h * d)",
        "reshape": "def combine_heads(x):\n    b, h, l, d = x.shape\n    return x.transpose(1, 2).reshape(b, l, h * d)",
        "flatten": "def combine_heads(x):\n    return x.permute(0, 2, 1, 3).flatten(2)",
        "cat": "def combine_heads(x):\n    return torch.cat(x.unbind(1), dim=-1)",
    },
    "MultiHeadAttention": {
        "helpers": MHA_OK,
        "nn_dropout": MHA_OK.replace("self.num_heads, self.dropout = num_heads, dropout", "self.num_heads, self.p = num_heads, dropout").replace("dropout_p=self.dropout if self.training else 0.0", "dropout_p=self.p if self.training else 0.0"),
        "inline_reshape": MHA_INIT + (
            "        b, lq, d = query.shape\n        h = self.num_heads\n"
            "        q = self.w_q(query).reshape(b, lq, h, d // h).transpose(1, 2)\n"
            "        k = self.w_k(key).reshape(b, key.shape[1], h, d // h).transpose(1, 2)\n"
            "        v = self.w_v(value).reshape(b, value.shape[1], h, d // h).transpose(1, 2)\n"
            "        out, w = scaled_dot_product_attention(q, k, v, mask, self.dropout if self.training else 0.0)\n"
            "        return self.w_o(out.transpose(1, 2).reshape(b, lq, d)), w\n"),
    },
    "make_padding_mask": {
        "ne_index": "def make_padding_mask(tokens, pad_id):\n    return (tokens != pad_id)[:, None, None, :]",
        "unsqueeze": "def make_padding_mask(tokens, pad_id):\n    return tokens.ne(pad_id).unsqueeze(1).unsqueeze(2)",
        "view": "def make_padding_mask(tokens, pad_id):\n    b, l = tokens.shape\n    return ~(tokens == pad_id).view(b, 1, 1, l)",
        "filled": "def make_padding_mask(tokens, pad_id):\n    mask = torch.ones(tokens.shape, dtype=torch.bool, device=tokens.device)\n    mask[tokens == pad_id] = False\n    return mask[:, None, None, :]",
        "tensor_pad": "def make_padding_mask(tokens, pad_id):\n    return tokens.ne(torch.tensor(pad_id))[:, None, None, :]",
    },
    "make_causal_mask": {
        "tril": "def make_causal_mask(size, device=None):\n    return torch.tril(torch.ones(size, size, dtype=torch.bool, device=device)).view(1, 1, size, size)",
        "arange_compare": "def make_causal_mask(size, device=None):\n    i = torch.arange(size, device=device)\n    return (i[None, :] <= i[:, None])[None, None]",
        "triu_not": "def make_causal_mask(size, device=None):\n    return ~torch.ones(size, size, device=device).triu(1).bool()[None, None]",
    },
    "make_decoder_mask": {
        "and": "def make_decoder_mask(tokens, pad_id):\n    return make_padding_mask(tokens, pad_id) & make_causal_mask(tokens.size(1), tokens.device)",
        "logical_and": "def make_decoder_mask(tokens, pad_id):\n    t = tokens.shape[1]\n    return torch.logical_and((tokens != pad_id)[:, None, None, :], torch.ones(t, t, dtype=torch.bool, device=tokens.device).tril())",
    },
    "sinusoidal_positional_encoding": {
        "exp_log": "def sinusoidal_positional_encoding(max_len, d_model):\n    if d_model % 2:\n        raise ValueError('odd')\n    pe = torch.zeros(max_len, d_model)\n    pos = torch.arange(max_len).unsqueeze(1).float()\n    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))\n    pe[:, 0::2] = torch.sin(pos * div)\n    pe[:, 1::2] = torch.cos(pos * div)\n    return pe",
        "pow_float64": "def sinusoidal_positional_encoding(max_len, d_model):\n    if d_model % 2 == 1:\n        raise ValueError('d_model must be even')\n    p = torch.arange(max_len, dtype=torch.float64)[:, None]\n    i = torch.arange(d_model // 2, dtype=torch.float64)\n    a = p / torch.pow(10000.0, 2 * i / d_model)\n    return torch.stack([a.sin(), a.cos()], -1).flatten(1).float()",
        "loops": "def sinusoidal_positional_encoding(max_len, d_model):\n    if d_model % 2:\n        raise ValueError('even d_model please')\n    pe = torch.zeros(max_len, d_model)\n    for p in range(max_len):\n        for i in range(0, d_model, 2):\n            pe[p, i] = math.sin(p / 10000 ** (i / d_model))\n            pe[p, i + 1] = math.cos(p / 10000 ** (i / d_model))\n    return pe",
    },
    "PositionalEncoding": {
        "buffer": PE_INIT + "        self.register_buffer('pe', sinusoidal_positional_encoding(max_len, d_model))\n\n" + PE_FORWARD_OK,
        # The table built inline in float32 with exp/log (annotated-transformer's way) or pow: its
        # float32 rounding must pass the float64 case too (SPEC: tolerances accept float32 formulas).
        "inline_exp_log_float32": PE_INIT + "        pe = torch.zeros(max_len, d_model)\n        position = torch.arange(0, max_len).unsqueeze(1)\n        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))\n        pe[:, 0::2] = torch.sin(position * div_term)\n        pe[:, 1::2] = torch.cos(position * div_term)\n        self.register_buffer('pe', pe)\n\n" + PE_FORWARD_OK,
        "inline_pow_float32": PE_INIT + "        pos = torch.arange(max_len, dtype=torch.float32)[:, None]\n        i = torch.arange(0, d_model, 2, dtype=torch.float32)\n        angle = pos / torch.pow(10000.0, i / d_model)\n        pe = torch.zeros(max_len, d_model)\n        pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle.cos()\n        self.register_buffer('pe', pe)\n\n" + PE_FORWARD_OK,
        "non_persistent_3d": PE_INIT + "        self.register_buffer('pe', sinusoidal_positional_encoding(max_len, d_model).unsqueeze(0), persistent=False)\n\n"
        "    def forward(self, x):\n        if x.size(1) > self.max_len:\n            raise ValueError('too long for max_len')\n        return self.dropout(x + self.pe[:, : x.size(1)])\n",
    },
    "TokenEmbedding": {
        "math_sqrt": EMB + "        return self.embedding(tokens) * math.sqrt(self.d_model)",
        "pow": EMB + "        return self.embedding(tokens) * self.d_model ** 0.5",
    },
})

MISTAKES.update({
    "split_heads": {
        "no_transpose": ("def split_heads(x, num_heads):\n    b, l, d = x.shape\n    return x.view(b, num_heads, l, d // num_heads)", "no transpose"),
        "forgot_transpose": ("def split_heads(x, num_heads):\n    b, l, d = x.shape\n    return x.view(b, l, num_heads, d // num_heads)", "heads come before positions"),
        "interleaved": ("def split_heads(x, num_heads):\n    b, l, d = x.shape\n    return x.view(b, l, d // num_heads, num_heads).permute(0, 3, 1, 2)", "every h-th feature"),
    },
    "combine_heads": {
        "no_contiguous": ("def combine_heads(x):\n    b, h, l, d = x.shape\n    return x.transpose(1, 2).view(b, l, h * d)", ".contiguous()"),
        "no_transpose": ("def combine_heads(x):\n    b, h, l, d = x.shape\n    return x.reshape(b, l, h * d)", "without transposing back"),
    },
    "MultiHeadAttention": {
        "no_w_o": (MHA_OK.replace("self.w_o(combine_heads(out))", "combine_heads(out)"), "w_o is missing"),
        "averaged_weights": (MHA_OK.replace("return self.w_o(combine_heads(out)), w", "return self.w_o(combine_heads(out)), w.mean(1)"), "averaged over heads"),
        "no_value_error": (MHA_OK.replace("raise ValueError('d_model must be divisible by num_heads')", "pass"), "should raise ValueError"),
        "assert_instead": (MHA_OK.replace("if d_model % num_heads != 0:\n            raise ValueError('d_model must be divisible by num_heads')", "assert d_model % num_heads == 0"), "raise ValueError"),
        "value_from_key": (MHA_OK.replace("split_heads(self.w_v(value), h)", "split_heads(self.w_k(value), h)"), "w_k to project the values"),
        "dropout_in_eval": (MHA_OK.replace("dropout_p=self.dropout if self.training else 0.0", "dropout_p=self.dropout"), "eval() mode"),
    },
    "make_padding_mask": {
        "inverted": ("def make_padding_mask(tokens, pad_id):\n    return (tokens == pad_id)[:, None, None, :]", "inverted"),
        "flat": ("def make_padding_mask(tokens, pad_id):\n    return tokens != pad_id", "(B, L)"),
        "three_dims": ("def make_padding_mask(tokens, pad_id):\n    return (tokens != pad_id).unsqueeze(1)", "(B, 1, L)"),
        "hardcoded_zero": ("def make_padding_mask(tokens, pad_id):\n    return (tokens != 0)[:, None, None, :]", "ignores pad_id"),
        "float": ("def make_padding_mask(tokens, pad_id):\n    return (tokens != pad_id).float()[:, None, None, :]", "bool"),
        "new_on_cpu": ("def make_padding_mask(tokens, pad_id):\n    mask = torch.ones(tokens.shape, dtype=torch.bool)\n    mask[tokens == pad_id] = False\n    return mask[:, None, None, :]", "device of `tokens`"),
    },
    "make_causal_mask": {
        "subsequent": ("def make_causal_mask(size, device=None):\n    return torch.ones(size, size, dtype=torch.bool, device=device).triu(1)[None, None]", "FUTURE"),
        "no_diagonal": ("def make_causal_mask(size, device=None):\n    return torch.ones(size, size, dtype=torch.bool, device=device).tril(-1)[None, None]", "diagonal"),
        "flat": ("def make_causal_mask(size, device=None):\n    return torch.ones(size, size, dtype=torch.bool, device=device).tril()", "(size, size)"),
        "ignores_device": ("def make_causal_mask(size, device=None):\n    return torch.ones(size, size, dtype=torch.bool).tril()[None, None]", "device"),
    },
    "make_decoder_mask": {
        "or": ("def make_decoder_mask(tokens, pad_id):\n    return make_padding_mask(tokens, pad_id) | make_causal_mask(tokens.size(1))", "OR"),
        "padding_only": ("def make_decoder_mask(tokens, pad_id):\n    t = tokens.size(1)\n    return make_padding_mask(tokens, pad_id).expand(-1, -1, t, -1)", "padding mask only"),
        "queries": ("def make_decoder_mask(tokens, pad_id):\n    return (tokens != pad_id)[:, None, :, None] & make_causal_mask(tokens.size(1))", "QUERIES"),
        "causal_on_cpu": ("def make_decoder_mask(tokens, pad_id):\n    return make_padding_mask(tokens, pad_id) & make_causal_mask(tokens.size(1))", "device of `tokens`"),
        "batch_as_length": ("def make_decoder_mask(tokens, pad_id):\n    return make_padding_mask(tokens, pad_id) & make_causal_mask(tokens.size(0), tokens.device)", "the batch size B = tokens.size(0)"),
        "len_as_length": ("def make_decoder_mask(tokens, pad_id):\n    return make_padding_mask(tokens, pad_id) & make_causal_mask(len(tokens), tokens.device)", "use tokens.size(1)"),
        "inline_batch_as_length": ("def make_decoder_mask(tokens, pad_id):\n    t = tokens.size(0)\n    causal = torch.ones(t, t, dtype=torch.bool, device=tokens.device).tril()\n    return (tokens != pad_id)[:, None, None, :] & causal", "the batch size B = tokens.size(0)"),
    },
    # The property test after make_padding_mask (a padded sentence gives what it gives alone): its
    # diagnosis names an inverted mask, and never blames padding for a sentence that has none.
    "make_padding_mask_no_effect": {
        "inverted": ("def make_padding_mask(tokens, pad_id):\n    return (tokens == pad_id)[:, None, None, :]", "has no padding and your mask for it is [0, 0, 0, 0, 0, 0] (1 = may attend); in the batch its real positions differ from the sentence run alone: the mask is inverted"),
        "all_blocked": ("def make_padding_mask(tokens, pad_id):\n    return torch.zeros_like(tokens, dtype=torch.bool)[:, None, None, :]", "a sentence without padding must have every key allowed"),
        "pads_let_through": ("def make_padding_mask(tokens, pad_id):\n    return (tokens != pad_id + 100)[:, None, None, :]", "has padding at positions [4, 5]"),
        "flat": ("def make_padding_mask(tokens, pad_id):\n    return tokens != pad_id", "the attention layer needs (B, 1, 1, L)"),
        "float": ("def make_padding_mask(tokens, pad_id):\n    return (tokens != pad_id).float()[:, None, None, :]", "bool tensor"),
    },
    "sinusoidal_positional_encoding": {
        "swapped": ("def sinusoidal_positional_encoding(max_len, d_model):\n    pe = torch.zeros(max_len, d_model)\n    pos = torch.arange(max_len)[:, None].float()\n    div = 10000 ** (torch.arange(0, d_model, 2).float() / d_model)\n    pe[:, 0::2] = torch.cos(pos / div)\n    pe[:, 1::2] = torch.sin(pos / div)\n    return pe", "swapped"),
        "exponent_i": ("def sinusoidal_positional_encoding(max_len, d_model):\n    pe = torch.zeros(max_len, d_model)\n    pos = torch.arange(max_len)[:, None].float()\n    div = 10000 ** (torch.arange(d_model // 2).float() / d_model)\n    pe[:, 0::2] = torch.sin(pos / div)\n    pe[:, 1::2] = torch.cos(pos / div)\n    return pe", "i/D instead of 2i/D"),
        "base_1000": ("def sinusoidal_positional_encoding(max_len, d_model):\n    pe = torch.zeros(max_len, d_model)\n    pos = torch.arange(max_len)[:, None].float()\n    div = 1000 ** (torch.arange(0, d_model, 2).float() / d_model)\n    pe[:, 0::2] = torch.sin(pos / div)\n    pe[:, 1::2] = torch.cos(pos / div)\n    return pe", "base is 1000"),
        "halves": ("def sinusoidal_positional_encoding(max_len, d_model):\n    pos = torch.arange(max_len)[:, None].float()\n    div = 10000 ** (torch.arange(0, d_model, 2).float() / d_model)\n    return torch.cat([torch.sin(pos / div), torch.cos(pos / div)], dim=1)", "first half"),
        "float64": ("def sinusoidal_positional_encoding(max_len, d_model):\n    pe = torch.zeros(max_len, d_model, dtype=torch.float64)\n    pos = torch.arange(max_len, dtype=torch.float64)[:, None]\n    div = 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)\n    pe[:, 0::2] = torch.sin(pos / div)\n    pe[:, 1::2] = torch.cos(pos / div)\n    return pe", "float32"),
    },
    "PositionalEncoding": {
        "plain_attribute": (PE_INIT + "        self.pe = sinusoidal_positional_encoding(max_len, d_model)\n\n" + PE_FORWARD_OK, "not a registered buffer"),
        "parameter": (PE_INIT + "        self.pe = nn.Parameter(sinusoidal_positional_encoding(max_len, d_model))\n\n" + PE_FORWARD_OK, "nn.Parameter"),
        "no_length_check": (PE_INIT + "        self.register_buffer('pe', sinusoidal_positional_encoding(max_len, d_model))\n\n"
                            "    def forward(self, x):\n        return self.dropout(x + self.pe[: x.size(1)])\n", "raise a ValueError"),
        "assert_instead": (PE_INIT + "        self.register_buffer('pe', sinusoidal_positional_encoding(max_len, d_model))\n\n"
                           "    def forward(self, x):\n        assert x.size(1) <= self.max_len, 'longer than max_len'\n"
                           "        return self.dropout(x + self.pe[: x.size(1)])\n", "raised AssertionError"),
        "index_error": (PE_INIT + "        self.register_buffer('pe', sinusoidal_positional_encoding(max_len, d_model))\n\n"
                        "    def forward(self, x):\n        if x.size(1) > self.max_len:\n            raise IndexError('longer than max_len')\n"
                        "        return self.dropout(x + self.pe[: x.size(1)])\n", "raise a ValueError that names max_len"),
        "no_dropout": (PE_INIT + "        self.register_buffer('pe', sinusoidal_positional_encoding(max_len, d_model))\n\n"
                       + PE_FORWARD_OK.replace("self.dropout(x + self.pe[: x.size(1)])", "x + self.pe[: x.size(1)]"), "nothing was dropped"),
    },
    "TokenEmbedding": {
        "no_scale": (EMB + "        return self.embedding(tokens)", "not scaled"),
        "times_d_model": (EMB + "        return self.embedding(tokens) * self.d_model", "multiplied by d_model"),
        "divided": (EMB + "        return self.embedding(tokens) / math.sqrt(self.d_model)", "divided by sqrt"),
    },
})

CHECKS.update({
    "split_heads": ("nb03", ["check_split_heads"]),
    "combine_heads": ("nb03", ["check_combine_heads"]),
    "MultiHeadAttention": ("nb03", ["check_MultiHeadAttention", "check_MultiHeadAttention_dropout"]),
    "make_padding_mask": ("nb04", ["check_make_padding_mask"]),
    "make_causal_mask": ("nb04", ["check_make_causal_mask"]),
    "make_decoder_mask": ("nb04", ["check_make_decoder_mask"]),
    "make_padding_mask_no_effect": ("nb04", ["check_padding_has_no_effect"]),
})
# Every correct padding mask passes the property test too.
CORRECT["make_padding_mask_no_effect"] = dict(CORRECT["make_padding_mask"])
CHECKS.update({
    "sinusoidal_positional_encoding": ("nb05", ["check_sinusoidal_positional_encoding"]),
    "PositionalEncoding": ("nb05", ["check_PositionalEncoding"]),
    "TokenEmbedding": ("nb05", ["check_TokenEmbedding"]),
})

# ---------------------------------------------------------------- notebook 06
FFN_INIT = ("class PositionwiseFeedForward(nn.Module):\n    def __init__(self, d_model, d_ff, dropout=0.1):\n"
            "        super().__init__()\n        self.w_1 = nn.Linear(d_model, d_ff)\n        self.w_2 = nn.Linear(d_ff, d_model)\n"
            "        self.dropout = nn.Dropout(dropout)\n\n")
ENC_INIT = ("class EncoderLayer(nn.Module):\n    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):\n        super().__init__()\n"
            "        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)\n"
            "        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)\n"
            "        self.norm1 = nn.LayerNorm(d_model)\n        self.norm2 = nn.LayerNorm(d_model)\n        self.dropout = nn.Dropout(dropout)\n\n")
DEC_INIT = ("class DecoderLayer(nn.Module):\n    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):\n        super().__init__()\n"
            "        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)\n"
            "        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)\n"
            "        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)\n"
            "        self.norm1 = nn.LayerNorm(d_model)\n        self.norm2 = nn.LayerNorm(d_model)\n"
            "        self.norm3 = nn.LayerNorm(d_model)\n        self.drop = nn.Dropout(dropout)\n\n")
STACK_INIT = ("class {name}(nn.Module):\n    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.1):\n        super().__init__()\n"
              "        self.layers = nn.ModuleList([{layer}(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])\n\n")
ENCODER_INIT = STACK_INIT.format(name="Encoder", layer="EncoderLayer")
DECODER_INIT = STACK_INIT.format(name="Decoder", layer="DecoderLayer")
MODEL_INIT = ("class Transformer(nn.Module):\n    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=512, num_heads=8, num_layers=6,\n"
              "                 d_ff=2048, dropout=0.1, max_len=5000, pad_id=0):\n        super().__init__()\n        self.pad_id = pad_id\n"
              "        self.src_embed = TokenEmbedding(src_vocab_size, d_model)\n        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model)\n"
              "        self.positional_encoding = PositionalEncoding(d_model, dropout, max_len)\n"
              "        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout)\n"
              "        self.decoder = Decoder(num_layers, d_model, num_heads, d_ff, dropout)\n"
              "        self.generator = nn.Linear(d_model, tgt_vocab_size)\n\n")
MODEL_OK = MODEL_INIT + (
    "    def encode(self, src, src_mask):\n        return self.encoder(self.positional_encoding(self.src_embed(src)), src_mask)\n\n"
    "    def decode(self, tgt, memory, src_mask, tgt_mask):\n"
    "        return self.decoder(self.positional_encoding(self.tgt_embed(tgt)), memory, src_mask, tgt_mask)\n\n"
    "    def forward(self, src, tgt):\n        src_mask = make_padding_mask(src, self.pad_id)\n"
    "        tgt_mask = make_decoder_mask(tgt, self.pad_id)\n"
    "        return self.generator(self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask))\n")
DEC_OK = DEC_INIT + (
    "    def forward(self, x, memory, src_mask, tgt_mask):\n"
    "        x = self.norm1(x + self.drop(self.self_attn(x, x, x, tgt_mask)[0]))\n"
    "        x = self.norm2(x + self.drop(self.cross_attn(x, memory, memory, src_mask)[0]))\n"
    "        return self.norm3(x + self.drop(self.feed_forward(x)))\n")
ENC_OK = ENC_INIT + ("    def forward(self, x, src_mask):\n        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask)[0]))\n"
                     "        return self.norm2(x + self.dropout(self.feed_forward(x)))\n")

LN = "def layer_norm(x, weight, bias, eps=1e-5):\n"

CORRECT.update({
    "layer_norm": {
        "var_mean": LN + "    var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)\n    return (x - mean) / torch.sqrt(var + eps) * weight + bias",
        "rsqrt_correction0": LN + "    mu = x.mean(-1, keepdim=True)\n    var = x.var(-1, correction=0, keepdim=True)\n    return (x - mu) * torch.rsqrt(var + eps) * weight + bias",
        "float64_inside": LN + "    z = x.double()\n    z = z - z.mean(-1, keepdim=True)\n    y = z / (z.pow(2).mean(-1, keepdim=True) + eps) ** 0.5\n    return (y * weight.double() + bias.double()).to(x.dtype)",
        "moments_by_hand": LN + "    n = x.shape[-1]\n    mean = x.sum(-1, keepdim=True) / n\n    var = ((x - mean) ** 2).sum(-1, keepdim=True) / n\n    return weight * ((x - mean) / (var + eps).sqrt()) + bias",
        "addcmul": LN + "    c = x - x.mean(-1, keepdim=True)\n    y = c / c.square().mean(-1, keepdim=True).add(eps).sqrt()\n    return torch.addcmul(bias, y, weight)",
    },
    "PositionwiseFeedForward": {
        "relu": FFN_INIT + "    def forward(self, x):\n        return self.w_2(self.dropout(torch.relu(self.w_1(x))))",
        "functional": FFN_INIT + "    def forward(self, x):\n        return self.w_2(F.dropout(F.relu(self.w_1(x)), self.dropout.p, self.training))",
        "dropout_before_relu": FFN_INIT + "    def forward(self, x):\n        return self.w_2(torch.relu(self.dropout(self.w_1(x))))",
        "clamp_sequential": FFN_INIT + "    def forward(self, x):\n        h = self.w_1(x).clamp_min(0.0)\n        h = self.dropout(h)\n        return self.w_2(h)",
    },
    "EncoderLayer": {
        "plain": ENC_OK,
        "sublayer_helper": ENC_INIT + ("    def _residual(self, x, f, norm):\n        return norm(x + self.dropout(f(x)))\n\n"
                                       "    def forward(self, x, src_mask):\n"
                                       "        x = self._residual(x, lambda y: self.self_attn(y, y, y, mask=src_mask)[0], self.norm1)\n"
                                       "        return self._residual(x, self.feed_forward, self.norm2)\n"),
        "functional_dropout": ENC_INIT + ("    def forward(self, x, src_mask):\n        p = self.dropout.p\n"
                                          "        a = F.dropout(self.self_attn(x, x, x, src_mask)[0], p, self.training)\n"
                                          "        x = self.norm1(x + a)\n"
                                          "        return self.norm2(x + F.dropout(self.feed_forward(x), p=p, training=self.training))\n"),
    },
    "DecoderLayer": {
        "plain": DEC_OK,
        "keywords": DEC_INIT + ("    def forward(self, x, memory, src_mask, tgt_mask):\n"
                                "        a, _ = self.self_attn(query=x, key=x, value=x, mask=tgt_mask)\n        x = self.norm1(x + self.drop(a))\n"
                                "        c, _ = self.cross_attn(query=x, key=memory, value=memory, mask=src_mask)\n        x = self.norm2(self.drop(c) + x)\n"
                                "        return self.norm3(x + self.drop(self.feed_forward(x)))\n"),
    },
    "Encoder": {
        "loop": ENCODER_INIT + "    def forward(self, x, src_mask):\n        for layer in self.layers:\n            x = layer(x, src_mask)\n        return x\n",
        "reduce": ENCODER_INIT + "    def forward(self, x, src_mask):\n        import functools\n        return functools.reduce(lambda h, f: f(h, src_mask), self.layers, x)\n",
    },
    "Decoder": {
        "loop": DECODER_INIT + "    def forward(self, x, memory, src_mask, tgt_mask):\n        for layer in self.layers:\n            x = layer(x, memory, src_mask, tgt_mask)\n        return x\n",
        "enumerate": DECODER_INIT + "    def forward(self, x, memory, src_mask, tgt_mask):\n        h = x\n        for i, layer in enumerate(self.layers):\n            h = self.layers[i](h, memory, src_mask=src_mask, tgt_mask=tgt_mask)\n        return h\n",
    },
    "Transformer": {
        "helpers": MODEL_OK,
        "inline_masks": MODEL_OK.replace("src_mask = make_padding_mask(src, self.pad_id)", "src_mask = (src != self.pad_id)[:, None, None, :]").replace(
            "tgt_mask = make_decoder_mask(tgt, self.pad_id)",
            "t = tgt.size(1)\n        tgt_mask = (tgt != self.pad_id)[:, None, None, :] & torch.ones(t, t, dtype=torch.bool).tril()"),
    },
})

MISTAKES.update({
    "layer_norm": {
        "unbiased_var": (LN + "    mean = x.mean(-1, keepdim=True)\n    return (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias", "unbiased variance"),
        "eps_on_std": (LN + "    mean = x.mean(-1, keepdim=True)\n    std = x.std(-1, unbiased=False, keepdim=True)\n    return (x - mean) / (std + eps) * weight + bias", "eps to the standard deviation"),
        "no_eps": (LN + "    mean = x.mean(-1, keepdim=True)\n    return (x - mean) / x.var(-1, unbiased=False, keepdim=True).sqrt() * weight + bias", "ignores eps"),
        "rms_norm": (LN + "    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight + bias", "RMSNorm"),
        "no_affine": (LN + "    mean = x.mean(-1, keepdim=True)\n    return (x - mean) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)", "ignores weight and bias"),
        "batch_axis": (LN + "    mean = x.mean(0, keepdim=True)\n    var = x.var(0, unbiased=False, keepdim=True)\n    return (x - mean) / torch.sqrt(var + eps) * weight + bias", "first axis"),
        "builtin": (LN + "    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)", "built-in"),
    },
    "PositionwiseFeedForward": {
        "no_relu": (FFN_INIT + "    def forward(self, x):\n        return self.w_2(self.dropout(self.w_1(x)))", "no ReLU"),
        "relu_after": (FFN_INIT + "    def forward(self, x):\n        return torch.relu(self.w_2(self.dropout(self.w_1(x))))", "after w_2"),
        "always_dropout": (FFN_INIT + "    def forward(self, x):\n        return self.w_2(F.dropout(torch.relu(self.w_1(x)), 0.5))", "eval() mode"),
        # A student's, from the course v3 walk-through: scored full marks before the train-mode comparison.
        "dropout_on_output": (FFN_INIT + "    def forward(self, x):\n        return self.dropout(self.w_2(torch.relu(self.w_1(x))))",
                              "output of w_2"),
        "extra_layer": (FFN_INIT.replace("        self.dropout = nn.Dropout(dropout)\n", "        self.dropout = nn.Dropout(dropout)\n        self.w_3 = nn.Linear(d_model, d_model)\n")
                        + "    def forward(self, x):\n        return self.w_3(self.w_2(self.dropout(torch.relu(self.w_1(x)))))", "does not need"),
    },
    "EncoderLayer": {
        "pre_ln": (ENC_INIT + "    def forward(self, x, src_mask):\n        y = self.norm1(x)\n        x = x + self.dropout(self.self_attn(y, y, y, src_mask)[0])\n"
                   "        return x + self.dropout(self.feed_forward(self.norm2(x)))\n", "pre-LN"),
        "no_mask": (ENC_OK.replace("self.self_attn(x, x, x, src_mask)", "self.self_attn(x, x, x)"), "padding mask is not passed"),
        "no_residual": (ENC_OK.replace("self.norm1(x + self.dropout(", "self.norm1((").replace("self.norm2(x + self.dropout(", "self.norm2(("), "residual connection"),
        "returns_tuple": (ENC_OK.replace("return self.norm2(x + self.dropout(self.feed_forward(x)))", "return self.norm2(x + self.dropout(self.feed_forward(x))), None"), "should be a torch.Tensor"),
        # From the course v3 issue: a layer that never calls self.dropout scored full marks.
        "dropout_after_sum": (ENC_OK.replace("self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask)[0]))",
                                             "self.norm1(self.dropout(x + self.self_attn(x, x, x, src_mask)[0]))")
                              .replace("self.norm2(x + self.dropout(self.feed_forward(x)))",
                                       "self.norm2(self.dropout(x + self.feed_forward(x)))"), "residual sum"),
        "dropout_attention_only": (ENC_OK.replace("x + self.dropout(self.feed_forward(x))", "x + self.feed_forward(x)"),
                                   "self_attn output only"),
        "no_dropout": (ENC_OK.replace("self.dropout(self.self_attn(x, x, x, src_mask)[0])", "self.self_attn(x, x, x, src_mask)[0]")
                       .replace("self.dropout(self.feed_forward(x))", "self.feed_forward(x)"), "never applies its dropout"),
    },
    "DecoderLayer": {
        "self_twice": (DEC_OK.replace("self.cross_attn(x, memory, memory, src_mask)", "self.cross_attn(x, x, x, tgt_mask)"), "from the encoder output"),
        "no_causal": (DEC_OK.replace("self.self_attn(x, x, x, tgt_mask)", "self.self_attn(x, x, x)"), "target mask is not applied"),
        "no_src_mask": (DEC_OK.replace("self.cross_attn(x, memory, memory, src_mask)", "self.cross_attn(x, memory, memory)"), "source padding mask"),
        "no_dropout": (DEC_OK.replace("self.drop(", "("), "never applies its dropout"),
        "swapped_masks": (DEC_OK.replace("self.self_attn(x, x, x, tgt_mask)", "self.self_attn(x, x, x, src_mask)")
                          .replace("self.cross_attn(x, memory, memory, src_mask)", "self.cross_attn(x, memory, memory, tgt_mask)"),
                          "swapped"),
        "memory_queries": (DEC_OK.replace("self.cross_attn(x, memory, memory, src_mask)", "self.cross_attn(memory, x, x, src_mask)"),
                           "queries from memory"),
        "cross_first": (DEC_INIT + ("    def forward(self, x, memory, src_mask, tgt_mask):\n"
                                    "        x = self.norm1(x + self.drop(self.cross_attn(x, memory, memory, src_mask)[0]))\n"
                                    "        x = self.norm2(x + self.drop(self.self_attn(x, x, x, tgt_mask)[0]))\n"
                                    "        return self.norm3(x + self.drop(self.feed_forward(x)))\n"), "comes before self-attention"),
    },
    "Encoder": {
        "not_chained": (ENCODER_INIT + "    def forward(self, x, src_mask):\n        for layer in self.layers:\n            out = layer(x, src_mask)\n        return out\n", "each layer's input"),
        "first_only": (ENCODER_INIT + "    def forward(self, x, src_mask):\n        for layer in self.layers:\n            return layer(x, src_mask)\n", "only the first layer"),
        "final_norm": (ENCODER_INIT + "    def forward(self, x, src_mask):\n        for layer in self.layers:\n            x = layer(x, src_mask)\n        return F.layer_norm(x, x.shape[-1:])\n", "final LayerNorm"),
        "shared_layer": (ENCODER_INIT.replace("nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])",
                                              "nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)] * num_layers)")
                         + "    def forward(self, x, src_mask):\n        for layer in self.layers:\n            x = layer(x, src_mask)\n        return x\n", "SAME module repeated"),
    },
    "Decoder": {
        "not_chained": (DECODER_INIT + "    def forward(self, x, memory, src_mask, tgt_mask):\n        out = x\n        for layer in self.layers:\n            out = layer(x, memory, src_mask, tgt_mask)\n        return out\n", "each layer's input"),
        "final_norm": (DECODER_INIT + "    def forward(self, x, memory, src_mask, tgt_mask):\n        for layer in self.layers:\n            x = layer(x, memory, src_mask, tgt_mask)\n        return F.layer_norm(x, x.shape[-1:])\n", "final LayerNorm"),
    },
    "Transformer": {
        "no_causal": (MODEL_OK.replace("tgt_mask = make_decoder_mask(tgt, self.pad_id)", "tgt_mask = make_padding_mask(tgt, self.pad_id)"), "causal mask"),
        "no_src_mask": (MODEL_OK.replace("src_mask = make_padding_mask(src, self.pad_id)", "src_mask = None"), "source padding"),
        # From the course v3 issue: the feedback said "only indices 2, 3, 4 ... differ" without naming padding.
        "causal_only": (MODEL_OK.replace("tgt_mask = make_decoder_mask(tgt, self.pad_id)", "tgt_mask = make_causal_mask(tgt.size(1))"),
                        "causal only; use make_decoder_mask"),
        "softmax": (MODEL_OK.replace("return self.generator(self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask))",
                                     "return torch.softmax(self.generator(self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)), dim=-1)"),
                    "probabilities"),
        "pad_zero": (MODEL_OK.replace("self.pad_id)", "0)"), "pad_id 0"),
        # The sqrt(d_model) scale applied again on top of TokenEmbedding's (course v5 issue: "max abs error 3.55").
        "embedding_scaled_twice": (MODEL_OK.replace("self.src_embed(src)", "self.src_embed(src) * math.sqrt(self.src_embed.d_model)"),
                                   "scaled by sqrt(d_model) = 2.83 twice"),
        # TokenEmbedding's nn.Embedding without its scale.
        "embedding_unscaled": (MODEL_OK.replace("self.tgt_embed(tgt)", "self.tgt_embed.embedding(tgt)"),
                               "without the sqrt(d_model)"),
        "log_softmax": (MODEL_OK.replace("return self.generator(self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask))",
                                         "return F.log_softmax(self.generator(self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)), -1)"), "log-probabilities"),
        "no_generator": (MODEL_OK.replace("return self.generator(self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask))",
                                          "return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)"), "decoder states"),
        "no_positional": (MODEL_OK.replace("self.encoder(self.positional_encoding(self.src_embed(src)), src_mask)", "self.encoder(self.src_embed(src), src_mask)"), "encode"),
    },
})

# ---------------------------------------------------------------- notebook 07
LS_HEAD = ("class LabelSmoothingLoss(nn.Module):\n    def __init__(self, smoothing=0.1, ignore_index=-100):\n        super().__init__()\n"
           "        self.smoothing, self.ignore_index = smoothing, ignore_index\n\n    def forward(self, logits, target):\n")
NOAM_HEAD = "def noam_lr(step, d_model, warmup_steps):\n    if step < 1:\n        raise ValueError('step counts from 1')\n"
TRAIN_OK = ("def train_epoch(model, loader, optimizer, scheduler, loss_fn, device):\n    model.train()\n    total, n = 0.0, 0\n"
            "    for src, tgt in loader:\n        src, tgt = src.to(device), tgt.to(device)\n"
            "        dec_in, labels = make_teacher_forcing_batch(tgt, model.pad_id)\n"
            "        loss = loss_fn(model(src, dec_in), labels)\n        optimizer.zero_grad()\n        loss.backward()\n"
            "        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n        optimizer.step()\n"
            "        if scheduler is not None:\n            scheduler.step()\n"
            "        k = int((labels != model.pad_id).sum())\n        total += loss.item() * k\n        n += k\n    return total / n\n")
GREEDY_OK = ("@torch.no_grad()\ndef greedy_decode(model, src, max_len, bos_id, eos_id):\n"
             "    src_mask = make_padding_mask(src, model.pad_id)\n    memory = model.encode(src, src_mask)\n"
             "    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)\n    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)\n"
             "    for _ in range(max_len - 1):\n        h = model.decode(ys, memory, src_mask, make_decoder_mask(ys, model.pad_id))\n"
             "        nxt = model.generator(h[:, -1]).argmax(-1)\n        nxt = torch.where(done, torch.full_like(nxt, model.pad_id), nxt)\n"
             "        ys = torch.cat([ys, nxt[:, None]], 1)\n        done |= nxt == eos_id\n        if done.all():\n            break\n    return ys\n")

CORRECT.update({
    "shift_right": {
        "cat": "def shift_right(tgt, bos_id):\n    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], 1)",
        "roll": "def shift_right(tgt, bos_id):\n    out = tgt.roll(1, dims=1).clone()\n    out[:, 0] = bos_id\n    return out",
        "pad": "def shift_right(tgt, bos_id):\n    return F.pad(tgt[:, :-1], (1, 0), value=bos_id)",
        # Reads a value of the input (.item()), which the meta device cannot give: not a device mistake.
        "checks_ids": ("def shift_right(tgt, bos_id):\n    if tgt.numel() and tgt.min().item() < 0:\n"
                       "        raise ValueError('token ids are >= 0')\n"
                       "    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], 1)"),
    },
    "make_teacher_forcing_batch": {
        "slices": "def make_teacher_forcing_batch(tgt, pad_id):\n    return tgt[:, :-1], tgt[:, 1:]",
        "narrow": "def make_teacher_forcing_batch(tgt, pad_id):\n    t = tgt.size(1) - 1\n    return tgt.narrow(1, 0, t), tgt.narrow(1, 1, t)",
        "clone": "def make_teacher_forcing_batch(tgt, pad_id):\n    return tgt[:, :-1].clone(), tgt[:, 1:].contiguous()",
    },
    "noam_lr": {
        "min": NOAM_HEAD + "    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)",
        "branches": NOAM_HEAD + "    if step < warmup_steps:\n        return step / (math.sqrt(d_model) * warmup_steps ** 1.5)\n    return 1 / math.sqrt(d_model * step)",
        "tensor": ("def noam_lr(step, d_model, warmup_steps):\n    if not step >= 1:\n        raise ValueError(f'step must be >= 1, got {step}')\n"
                   "    s = torch.tensor(float(step), dtype=torch.float64)\n    return torch.rsqrt(torch.tensor(float(d_model), dtype=torch.float64)) * torch.minimum(s.rsqrt(), s * warmup_steps ** -1.5)"),
    },
    "LabelSmoothingLoss": {
        "gather": LS_HEAD + ("        logp = F.log_softmax(logits, -1).reshape(-1, logits.size(-1))\n        t = target.reshape(-1)\n        keep = t != self.ignore_index\n"
                             "        nll = -logp.gather(1, t.masked_fill(~keep, 0)[:, None]).squeeze(1)\n"
                             "        return ((1 - self.smoothing) * nll - self.smoothing * logp.mean(-1))[keep].mean()\n"),
        "distribution": LS_HEAD + ("        V = logits.size(-1)\n        logp = torch.log_softmax(logits.reshape(-1, V), -1)\n        t = target.reshape(-1)\n"
                                   "        keep = t != self.ignore_index\n        q = torch.full_like(logp, self.smoothing / V)\n"
                                   "        q[keep, t[keep]] += 1 - self.smoothing\n        return -(q * logp).sum(-1)[keep].sum() / keep.sum()\n"),
        "builtin": LS_HEAD + ("        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1),\n"
                              "                               label_smoothing=self.smoothing, ignore_index=self.ignore_index)\n"),
    },
    "train_epoch": {
        "clipped": TRAIN_OK,
        "no_clip_tensor_sum": TRAIN_OK.replace("        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", "").replace(
            "optimizer.zero_grad()", "optimizer.zero_grad(set_to_none=True)"),
        "slices_reshape": TRAIN_OK.replace("dec_in, labels = make_teacher_forcing_batch(tgt, model.pad_id)", "dec_in, labels = tgt[:, :-1], tgt[:, 1:]").replace(
            "loss = loss_fn(model(src, dec_in), labels)", "logits = model(src, dec_in)\n        loss = loss_fn(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))"),
    },
    "greedy_decode": {
        "loop": GREEDY_OK,
        "while": GREEDY_OK.replace("    for _ in range(max_len - 1):\n", "    while ys.size(1) < max_len:\n"),
        # The causal mask alone for the target (as the notebook's hint words it): generated tokens
        # are never <pad> before a row ends, so target padding changes nothing here.
        "causal_only_target": "from course_blocks import make_causal_mask\n\n" + GREEDY_OK.replace("make_decoder_mask(ys, model.pad_id)", "make_causal_mask(ys.size(1), ys.device)"),
        # Through forward(src, ys), which builds the same masks itself (bentrevett-style loops).
        "forward": GREEDY_OK.replace("        h = model.decode(ys, memory, src_mask, make_decoder_mask(ys, model.pad_id))\n"
                                     "        nxt = model.generator(h[:, -1]).argmax(-1)\n",
                                     "        nxt = model(src, ys)[:, -1].argmax(-1)\n"),
    },
})

MISTAKES.update({
    "shift_right": {
        "left": ("def shift_right(tgt, bos_id):\n    return F.pad(tgt[:, 1:], (0, 1), value=0)", "shifts left"),
        "keeps_last": ("def shift_right(tgt, bos_id):\n    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt], 1)", "one longer"),
        "bos_at_end": ("def shift_right(tgt, bos_id):\n    return torch.cat([tgt[:, 1:], torch.full_like(tgt[:, :1], bos_id)], 1)", "appended at the end"),
        "overwrite": ("def shift_right(tgt, bos_id):\n    out = tgt.clone()\n    out[:, 0] = bos_id\n    return out", "replaced by bos_id"),
        "bos_on_cpu": ("def shift_right(tgt, bos_id):\n    bos = torch.full((tgt.size(0), 1), bos_id)\n"
                       "    return torch.cat([bos, tgt[:, :-1]], 1)", "made on the CPU"),
    },
    "make_teacher_forcing_batch": {
        "not_shifted": ("def make_teacher_forcing_batch(tgt, pad_id):\n    return tgt[:, :-1], tgt[:, :-1]", "NEXT token"),
        "swapped": ("def make_teacher_forcing_batch(tgt, pad_id):\n    return tgt[:, 1:], tgt[:, :-1]", "swapped"),
        "whole_input": ("def make_teacher_forcing_batch(tgt, pad_id):\n    return tgt, tgt[:, 1:]", "whole target"),
    },
    "noam_lr": {
        "max": ("def noam_lr(step, d_model, warmup_steps):\n    return d_model ** -0.5 * max(step ** -0.5, step * warmup_steps ** -1.5)", "max instead of min"),
        "no_d_model": ("def noam_lr(step, d_model, warmup_steps):\n    return min(step ** -0.5, step * warmup_steps ** -1.5)", "d_model^-0.5 factor"),
        "step_from_zero": ("def noam_lr(step, d_model, warmup_steps):\n    step = max(step - 1, 1e-9)\n    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)", "from 0"),
        "warmup_power": ("def noam_lr(step, d_model, warmup_steps):\n    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -0.5)", "^-1.5"),
        # The docstring asks for ValueError at step < 1: 0 ** -0.5 raises ZeroDivisionError instead.
        "no_value_error": ("def noam_lr(step, d_model, warmup_steps):\n    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)", "ValueError"),
        "clamps_step": ("def noam_lr(step, d_model, warmup_steps):\n    step = max(step, 1)\n    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)", "returned a rate"),
        # Off by one step (course v5 issue: the feedback said "relative error 1" and nothing else).
        "warmup_step_behind": (NOAM_HEAD + "    return d_model ** -0.5 * min(step ** -0.5, (step - 1) * warmup_steps ** -1.5)", "one step behind in the warm-up branch"),
        "step_ahead": (NOAM_HEAD + "    step = step + 1\n    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)", "rate of step + 1"),
        "decay_step_behind": (NOAM_HEAD + "    return d_model ** -0.5 * min((step - 1) ** -0.5 if step > 1 else 1.0, step * warmup_steps ** -1.5)", "one step behind: steps count from 1"),
    },
    "LabelSmoothingLoss": {
        "no_ignore": (LS_HEAD + ("        logp = F.log_softmax(logits, -1).reshape(-1, logits.size(-1))\n        t = target.reshape(-1).clamp(min=0)\n"
                                 "        nll = -logp.gather(1, t[:, None]).squeeze(1)\n"
                                 "        return ((1 - self.smoothing) * nll - self.smoothing * logp.mean(-1)).mean()\n"), "not ignored"),
        "over_others": (LS_HEAD + ("        V = logits.size(-1)\n        logp = F.log_softmax(logits, -1).reshape(-1, V)\n        t = target.reshape(-1)\n"
                                   "        keep = t != self.ignore_index\n        q = torch.full_like(logp, self.smoothing / (V - 1))\n"
                                   "        q.scatter_(1, t.clamp(min=0)[:, None], 1 - self.smoothing)\n        return -(q * logp).sum(-1)[keep].mean()\n"), "V-1 wrong classes"),
        "no_smoothing": (LS_HEAD + "        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1), ignore_index=self.ignore_index)\n", "plain cross-entropy"),
        "summed": (LS_HEAD + ("        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1), label_smoothing=self.smoothing,\n"
                              "                               ignore_index=self.ignore_index, reduction='sum')\n"), "summed"),
        "divide_all": (LS_HEAD + ("        logp = F.log_softmax(logits, -1).reshape(-1, logits.size(-1))\n        t = target.reshape(-1)\n        keep = t != self.ignore_index\n"
                                  "        nll = -logp.gather(1, t.masked_fill(~keep, 0)[:, None]).squeeze(1)\n"
                                  "        loss = (1 - self.smoothing) * nll - self.smoothing * logp.mean(-1)\n        return (loss * keep).sum() / t.numel()\n"), "ALL positions"),
    },
    "train_epoch": {
        "no_zero_grad": (TRAIN_OK.replace("        optimizer.zero_grad()\n", ""), "accumulate"),
        "mean_of_batches": (TRAIN_OK.replace("total += loss.item() * k\n        n += k", "total += loss.item()\n        n += 1"), "PER TARGET TOKEN"),
        "whole_target": (TRAIN_OK.replace("loss = loss_fn(model(src, dec_in), labels)", "loss = loss_fn(model(src, tgt)[:, :-1], labels)"), "whole target"),
        "no_train_mode": (TRAIN_OK.replace("    model.train()\n", ""), "eval() mode"),
        "scheduler_per_epoch": (TRAIN_OK.replace("        if scheduler is not None:\n            scheduler.step()\n", "").replace(
            "    return total / n\n", "    if scheduler is not None:\n        scheduler.step()\n    return total / n\n"), "once per batch"),
    },
    "greedy_decode": {
        # Made on the CPU: on a GPU, decode() meets a CPU tensor (caught on the meta device).
        "ys_on_cpu": (GREEDY_OK.replace(", device=src.device)", ")"), "is made on the CPU"),
        "causal_mask_on_cpu": ("from course_blocks import make_causal_mask\n\n" + GREEDY_OK.replace("make_decoder_mask(ys, model.pad_id)", "make_causal_mask(ys.size(1))"),
                               "is made on the CPU"),
        "no_pad_after_eos": (GREEDY_OK.replace("        nxt = torch.where(done, torch.full_like(nxt, model.pad_id), nxt)\n", ""), "pad_id"),
        "no_early_stop": (GREEDY_OK.replace("        if done.all():\n            break\n", ""), "stop as soon as"),
        # Never looks at <eos> (course v5 issue: the feedback gave the shape alone).
        "ignores_eos": (GREEDY_OK.replace("        nxt = torch.where(done, torch.full_like(nxt, model.pad_id), nxt)\n", "")
                        .replace("        if done.all():\n            break\n", ""), "keeps generating after its <eos>"),
        "max_len_without_bos": (GREEDY_OK.replace("range(max_len - 1)", "range(max_len)"), "max_len"),
        "first_position": (GREEDY_OK.replace("h[:, -1]", "h[:, 0]"), "LAST position"),
        # From public implementations: a decoding loop that masks only causally and never passes
        # the source padding mask (memory = model.encode(src, None)).
        "no_source_mask": ("from course_blocks import make_causal_mask\n\n" + GREEDY_OK.replace("    src_mask = make_padding_mask(src, model.pad_id)\n",
                                             "    src_mask = None\n")
                           .replace("make_decoder_mask(ys, model.pad_id)", "make_causal_mask(ys.size(1))"),
                           "source padding mask"),
        "inverted_causal": ("from course_blocks import make_causal_mask\n\n" + GREEDY_OK.replace("make_decoder_mask(ys, model.pad_id)", "~make_causal_mask(ys.size(1))"),
                            "inverted"),
        "no_target_mask": (GREEDY_OK.replace("make_decoder_mask(ys, model.pad_id)", "None"), "no causal mask"),
    },
})

CHECKS.update({name: ("nb06", [f"check_{name}"]) for name in ["layer_norm"]})
CHECKS.update({name: ("nb06", [f"check_{name}"]) for name in
               ["PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "Transformer"]})
CHECKS.update({name: ("nb07", [f"check_{name}"]) for name in
               ["shift_right", "make_teacher_forcing_batch", "noam_lr", "LabelSmoothingLoss", "train_epoch", "greedy_decode"]})

# ------------------------------------------------------- notebook 07: beam search and BPE
BEAM_OK = ("@torch.no_grad()\ndef beam_search(model, src, max_len, bos_id, eos_id, beam_size=4, length_penalty=0.6):\n"
           "    def score(h):\n        return h[1] / ((5 + len(h[0]) - 1) / 6) ** length_penalty\n"
           "    rows = []\n    for row in src:\n        row = row[None]\n"
           "        mask = make_padding_mask(row, model.pad_id)\n        memory = model.encode(row, mask)\n"
           "        beams = [([bos_id], 0.0)]\n"
           "        while max(len(t) for t, _ in beams) < max_len and not all(t[-1] == eos_id for t, _ in beams):\n"
           "            cands = []\n            for tokens, lp in beams:\n"
           "                if tokens[-1] == eos_id:\n                    cands.append((tokens, lp))\n                    continue\n"
           "                ys = torch.tensor([tokens], device=src.device)\n"
           "                h = model.decode(ys, memory, mask, make_decoder_mask(ys, model.pad_id))\n"
           "                step = F.log_softmax(model.generator(h[0, -1]), -1)\n"
           "                cands += [(tokens + [v], lp + s) for v, s in enumerate(step.tolist())]\n"
           "            beams = sorted(cands, key=score, reverse=True)[:beam_size]\n"
           "        rows.append(max(beams, key=score)[0])\n"
           "    width = max(len(r) for r in rows)\n"
           "    return torch.tensor([r + [model.pad_id] * (width - len(r)) for r in rows], device=src.device)\n")
# Batched over rows and hypotheses, with -inf for the empty slots of the first step.
BEAM_BATCHED = ("@torch.no_grad()\ndef beam_search(model, src, max_len, bos_id, eos_id, beam_size=4, length_penalty=0.6):\n"
                "    B, K, pad = src.size(0), beam_size, model.pad_id\n"
                "    mask = make_padding_mask(src, pad).repeat_interleave(K, 0)\n"
                "    memory = model.encode(src, make_padding_mask(src, pad)).repeat_interleave(K, 0)\n"
                "    dev = src.device\n    ys = torch.full((B * K, 1), bos_id, device=dev)\n    score_lp = torch.full((B, K), float('-inf'), device=dev)\n    score_lp[:, 0] = 0\n"
                "    done = torch.zeros(B, K, dtype=torch.bool, device=dev)\n    n = torch.zeros(B, K, device=dev)\n"
                "    lp = lambda length: ((5 + length) / 6) ** length_penalty\n"
                "    for t in range(1, max_len):\n        if done.all():\n            break\n"
                "        logp = model.generator(model.decode(ys, memory, mask, make_decoder_mask(ys, pad))[:, -1]).log_softmax(-1)\n"
                "        V = logp.size(-1)\n        cand = score_lp[..., None] + logp.view(B, K, V)\n"
                "        cand = torch.where(done[..., None], torch.full_like(cand, float('-inf')), cand)\n"
                "        cand[..., pad] = torch.where(done, score_lp, cand[..., pad])\n"
                "        length = torch.where(done[..., None], n[..., None], torch.full_like(cand, t))\n"
                "        idx = (cand / lp(length)).view(B, -1).topk(K).indices\n"
                "        beam, tok = idx // V, idx % V\n        r = torch.arange(B, device=dev)[:, None]\n"
                "        score_lp, n = cand.view(B, -1).gather(1, idx), length.view(B, -1).gather(1, idx)\n"
                "        done = done[r, beam] | (tok == eos_id)\n"
                "        ys = torch.cat([ys.view(B, K, -1)[r, beam], tok[..., None]], -1).view(B * K, -1)\n"
                "    best = (score_lp / lp(n)).argmax(-1)\n    rows = torch.arange(B, device=dev)\n    out = ys.view(B, K, -1)[rows, best]\n"
                "    return out[:, :1 + int(n[rows, best].max())]\n")
# Sennrich et al.'s published code style: symbols joined by spaces, merged with a regex that
# only matches whole symbols.
BPE_REGEX = ("import re, collections\n\ndef learn_bpe(word_counts, num_merges):\n"
             "    vocab = {' '.join(list(w) + ['</w>']): c for w, c in word_counts.items()}\n    merges = []\n"
             "    for _ in range(num_merges):\n        pairs = collections.defaultdict(int)\n"
             "        for word, c in vocab.items():\n            s = word.split()\n"
             "            for i in range(len(s) - 1):\n                pairs[s[i], s[i + 1]] += c\n"
             "        if not pairs:\n            break\n        best = max(pairs, key=pairs.get)\n        merges.append(best)\n"
             "        p = re.compile(r'(?<!\\S)' + re.escape(' '.join(best)) + r'(?!\\S)')\n"
             "        vocab = {p.sub(''.join(best), w): c for w, c in vocab.items()}\n    return merges\n")
BPE_COUNTER = ("from collections import Counter\n\ndef _merge(symbols, pair):\n    out = []\n    i = 0\n"
               "    while i < len(symbols):\n        if tuple(symbols[i:i + 2]) == pair:\n"
               "            out.append(pair[0] + pair[1])\n            i += 2\n        else:\n"
               "            out.append(symbols[i])\n            i += 1\n    return out\n\n"
               "def learn_bpe(word_counts, num_merges):\n"
               "    words = [(list(w) + ['</w>'], c) for w, c in word_counts.items()]\n    merges = []\n"
               "    while len(merges) < num_merges:\n        pairs = Counter()\n        for s, c in words:\n"
               "            for p in zip(s, s[1:]):\n                pairs[p] += c\n        if not pairs:\n            break\n"
               "        best = pairs.most_common(1)[0][0]\n        merges.append(best)\n"
               "        words = [(_merge(s, best), c) for s, c in words]\n    return merges\n")
APPLY_OK = ("def apply_bpe(word, merges):\n    symbols = list(word) + ['</w>']\n    for a, b in merges:\n"
            "        out, i = [], 0\n        while i < len(symbols):\n"
            "            if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:\n"
            "                out.append(a + b)\n                i += 2\n            else:\n"
            "                out.append(symbols[i])\n                i += 1\n        symbols = out\n    return symbols\n")

CORRECT.update({
    "beam_search": {"rows_lists": BEAM_OK, "batched": BEAM_BATCHED,
                    "topk_per_hypothesis": BEAM_OK.replace(
                        "                cands += [(tokens + [v], lp + s) for v, s in enumerate(step.tolist())]\n",
                        "                top = step.topk(beam_size)\n"
                        "                cands += [(tokens + [v], lp + s) for s, v in zip(top.values.tolist(), top.indices.tolist())]\n")},
    "learn_bpe": {"regex": BPE_REGEX, "counter": BPE_COUNTER},
    "apply_bpe": {"loop": APPLY_OK,
                  "regex": ("import re\n\ndef apply_bpe(word, merges):\n    s = ' '.join(list(word) + ['</w>'])\n"
                            "    for pair in merges:\n"
                            "        s = re.sub(r'(?<!\\S)' + re.escape(' '.join(pair)) + r'(?!\\S)', ''.join(pair), s)\n"
                            "    return s.split(' ')\n")},
})

MISTAKES.update({
    "beam_search": {
        # Made on the CPU: on a GPU, the first decode() raises, or the result comes back on the CPU.
        "rows_lists_on_cpu": (BEAM_OK.replace(", device=src.device)", ")"), "is made on the CPU"),
        "batched_on_cpu": (BEAM_BATCHED.replace(", device=dev)", ")"), "is made on the CPU"),
        "no_length_penalty": (BEAM_OK.replace("/ ((5 + len(h[0]) - 1) / 6) ** length_penalty", ""), "length penalty is missing"),
        "power_penalty": (BEAM_OK.replace("((5 + len(h[0]) - 1) / 6) ** length_penalty", "max(len(h[0]) - 1, 1) ** length_penalty"), "|Y| ** alpha"),
        "extends_finished": (BEAM_OK.replace("                if tokens[-1] == eos_id:\n                    cands.append((tokens, lp))\n                    continue\n", ""),
                             "carried over unchanged"),
        "copies_of_bos": (BEAM_OK.replace("beams = [([bos_id], 0.0)]", "beams = [([bos_id], 0.0)] * beam_size"), "copies of <bos>"),
        # The loop tests the best hypothesis's length: a finished, short best one never ends it.
        "bound_on_best": (BEAM_OK.replace("max(len(t) for t, _ in beams) < max_len", "len(beams[0][0]) < max_len"),
                          "already hold max_len"),
        "probabilities": (BEAM_OK.replace("beams = [([bos_id], 0.0)]", "beams = [([bos_id], 1.0)]").replace(
            "step = F.log_softmax(model.generator(h[0, -1]), -1)", "step = F.softmax(model.generator(h[0, -1]), -1)").replace(
            "lp + s) for v, s", "lp * s) for v, s"), "multiply probabilities"),
    },
    "learn_bpe": {
        "no_end_marker": (BPE_COUNTER.replace("list(w) + ['</w>']", "list(w)"), "'</w>'"),
        "unweighted": (BPE_COUNTER.replace("pairs[p] += c", "pairs[p] += 1"), "weight each word's pairs by its count"),
        # The classic bug of merging on joined strings without symbol boundaries.
        "string_replace": (BPE_REGEX.replace("p.sub(''.join(best), w)", "w.replace(' '.join(best), ''.join(best))"),
                           "string replace"),
        "off_by_one": (BPE_COUNTER.replace("while len(merges) < num_merges:", "while len(merges) <= num_merges:"), "num_merges"),
    },
    "apply_bpe": {
        "no_end_marker": (APPLY_OK.replace("list(word) + ['</w>']", "list(word)"), "'</w>'"),
        "returns_string": (APPLY_OK.replace("    return symbols\n", "    return ' '.join(symbols)\n"), "returned a string"),
        "first_only": ("def apply_bpe(word, merges):\n    symbols = list(word) + ['</w>']\n    for a, b in merges:\n"
                       "        for i in range(len(symbols) - 1):\n            if symbols[i] == a and symbols[i + 1] == b:\n"
                       "                symbols[i:i + 2] = [a + b]\n                break\n    return symbols\n", "first occurrence"),
        # The student's answer from the course v3 issue: merging with str.replace on the joined symbols.
        "str_replace": ("def apply_bpe(word, merges):\n    text = ' '.join(list(word) + ['</w>'])\n    for a, b in merges:\n"
                        "        text = text.replace(a + ' ' + b, a + b)\n    return text.split()\n", "across symbol boundaries"),
    },
})

CHECKS.update({name: ("nb07", [f"check_{name}"]) for name in ["beam_search", "learn_bpe", "apply_bpe"]})

# ------------------------------------------------------------ notebook 08: a modern decoder
RMS_INIT = ("class RMSNorm(nn.Module):\n    def __init__(self, d_model, eps=1e-6):\n        super().__init__()\n"
            "        self.eps = eps\n        self.weight = nn.Parameter(torch.ones(d_model))\n\n    def forward(self, x):\n")
SWIGLU_INIT = ("class SwiGLU(nn.Module):\n    def __init__(self, d_model, d_ff):\n        super().__init__()\n"
               "        self.w1 = nn.Linear(d_model, d_ff, bias=False)\n        self.w3 = nn.Linear(d_model, d_ff, bias=False)\n"
               "        self.w2 = nn.Linear(d_ff, d_model, bias=False)\n\n    def forward(self, x):\n")
ROPE_HEAD = "def apply_rotary_embedding(x, positions, base=10000.0):\n    if x.size(-1) % 2:\n        raise ValueError('d must be even')\n"
ROPE_ANGLES = ("    d = x.size(-1)\n    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)\n"
               "    angles = positions.to(x.device).double()[:, None] * theta\n    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)\n")
ROPE_OK = ROPE_HEAD + ROPE_ANGLES + ("    a, b = x[..., 0::2], x[..., 1::2]\n"
                                     "    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)\n")
GQA_INIT = ("class GroupedQueryAttention(nn.Module):\n"
            "    def __init__(self, d_model, num_heads, num_kv_heads, rope_base=10000.0):\n        super().__init__()\n"
            "        if d_model % num_heads:\n            raise ValueError('d_model % num_heads')\n"
            "        if num_heads % num_kv_heads:\n            raise ValueError('num_heads % num_kv_heads')\n"
            "        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads\n        self.d_head = d_model // num_heads\n"
            "        self.rope_base = rope_base\n        self.w_q = nn.Linear(d_model, d_model, bias=False)\n"
            "        self.w_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)\n"
            "        self.w_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)\n"
            "        self.w_o = nn.Linear(d_model, d_model, bias=False)\n\n")
GQA_OK = GQA_INIT + (
    "    def forward(self, x, past_kv=None):\n        B, L, D = x.shape\n"
    "        P = 0 if past_kv is None else past_kv[0].shape[2]\n"
    "        q = self.w_q(x).view(B, L, self.num_heads, self.d_head).transpose(1, 2)\n"
    "        k = self.w_k(x).view(B, L, self.num_kv_heads, self.d_head).transpose(1, 2)\n"
    "        v = self.w_v(x).view(B, L, self.num_kv_heads, self.d_head).transpose(1, 2)\n"
    "        pos = torch.arange(P, P + L, device=x.device)\n"
    "        q, k = apply_rotary_embedding(q, pos, self.rope_base), apply_rotary_embedding(k, pos, self.rope_base)\n"
    "        if past_kv is not None:\n            k = torch.cat([past_kv[0], k], dim=2)\n            v = torch.cat([past_kv[1], v], dim=2)\n"
    "        n = self.num_heads // self.num_kv_heads\n"
    "        s = q @ repeat_kv(k, n).transpose(-2, -1) / math.sqrt(self.d_head)\n"
    "        mask = torch.ones(L, P + L, dtype=torch.bool, device=x.device).tril(P)\n"
    "        w = s.masked_fill(~mask, float('-inf')).softmax(-1)\n"
    "        out = (w @ repeat_kv(v, n)).transpose(1, 2).reshape(B, L, D)\n"
    "        return self.w_o(out), (k, v)\n")
TILES_HEAD = "def online_softmax_attention(query, key, value, tile_size=64, causal=False):\n    if tile_size < 1:\n        raise ValueError('tile_size >= 1')\n"
TILES_OK = TILES_HEAD + (
    "    Lq, Lk = query.shape[-2], key.shape[-2]\n    scale = query.shape[-1] ** -0.5\n"
    "    m = torch.full(query.shape[:-1] + (1,), float('-inf'), dtype=query.dtype, device=query.device)\n"
    "    l = torch.zeros_like(m)\n    acc = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype, device=query.device)\n"
    "    qpos = torch.arange(Lq, device=query.device)[:, None] + Lk - Lq\n"
    "    for s in range(0, Lk, tile_size):\n        kt, vt = key[..., s:s + tile_size, :], value[..., s:s + tile_size, :]\n"
    "        sc = query @ kt.transpose(-1, -2) * scale\n"
    "        if causal:\n            sc = sc.masked_fill(torch.arange(s, s + kt.shape[-2], device=key.device)[None, :] > qpos, float('-inf'))\n"
    "        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))\n"
    "        m_safe = torch.where(m_new == float('-inf'), torch.zeros_like(m_new), m_new)\n"
    "        c = torch.exp(m - m_safe)\n        p = torch.exp(sc - m_safe)\n"
    "        l = l * c + p.sum(-1, keepdim=True)\n        acc = acc * c + p @ vt\n        m = m_new\n"
    "    return acc / l\n")
BLOCK_INIT = ("class DecoderBlock(nn.Module):\n    def __init__(self, d_model, num_heads, num_kv_heads, d_ff):\n"
              "        super().__init__()\n        self.attn_norm = RMSNorm(d_model)\n"
              "        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads)\n"
              "        self.ffn_norm = RMSNorm(d_model)\n        self.ffn = SwiGLU(d_model, d_ff)\n\n"
              "    def forward(self, x, past_kv=None):\n")
LM_INIT = ("class DecoderLM(nn.Module):\n    def __init__(self, vocab_size, d_model, num_heads, num_kv_heads, d_ff, num_layers):\n"
           "        super().__init__()\n        self.embedding = nn.Embedding(vocab_size, d_model)\n"
           "        self.layers = nn.ModuleList(DecoderBlock(d_model, num_heads, num_kv_heads, d_ff) for _ in range(num_layers))\n"
           "        self.norm = RMSNorm(d_model)\n        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)\n")
LM_FORWARD = ("        nn.init.normal_(self.embedding.weight, std=0.02)\n\n    def forward(self, tokens, past_kvs=None):\n"
              "        x = self.embedding(tokens)\n        presents = []\n"
              "        for i, layer in enumerate(self.layers):\n"
              "            x, kv = layer(x, None if past_kvs is None else past_kvs[i])\n            presents.append(kv)\n"
              "        return self.lm_head(self.norm(x)), presents\n")
LM_OK = LM_INIT + "        self.lm_head.weight = self.embedding.weight\n" + LM_FORWARD
TOP_P_HEAD = "def top_p_filter(logits, top_p):\n    if not 0 < top_p <= 1:\n        raise ValueError('top_p in (0, 1]')\n"
TOP_P_OK = TOP_P_HEAD + (
    "    if top_p == 1:\n        return logits\n"
    "    v, idx = torch.sort(logits, dim=-1, descending=True, stable=True)\n    p = v.softmax(-1)\n"
    "    keep = (p.cumsum(-1) - p) < top_p\n"
    "    return logits.masked_fill(~torch.zeros_like(keep).scatter(-1, idx, keep), float('-inf'))\n")
SAMPLE_HEAD = ("def sample_next_token(logits, temperature=1.0, top_p=1.0):\n    if temperature < 0:\n"
               "        raise ValueError('temperature >= 0')\n    if temperature == 0:\n        return logits.argmax(-1)\n")
GENERATE_HEAD = "@torch.no_grad()\ndef generate(model, prompt, max_new_tokens, temperature=1.0, top_p=1.0):\n"

CORRECT.update({
    "RMSNorm": {
        "rsqrt": RMS_INIT + "        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight",
        "sqrt_of_sum": RMS_INIT + "        rms = torch.sqrt(x.square().sum(-1, keepdim=True) / x.shape[-1] + self.eps)\n        return self.weight * (x / rms)",
        "vector_norm": RMS_INIT + "        ms = torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / x.size(-1)\n        return x / (ms + self.eps).sqrt() * self.weight",
        "builtin": RMS_INIT + "        return F.rms_norm(x, (x.size(-1),), self.weight, self.eps)",
    },
    "apply_rotary_embedding": {
        "stack_flatten": ROPE_OK,
        "checks_positions": ROPE_OK.replace("    d = x.size(-1)\n", "    d = x.size(-1)\n    if positions.numel() and positions.min().item() < 0:\n"
                                            "        raise ValueError('positions are >= 0')\n", 1),
        "complex": ROPE_HEAD + ROPE_ANGLES.replace("    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)\n", "") + (
            "    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())\n"
            "    z = z * torch.polar(torch.ones_like(angles), angles)\n"
            "    return torch.view_as_real(z).flatten(-2).to(x.dtype)\n"),
        "empty_like": ROPE_HEAD + ROPE_ANGLES + (
            "    out = torch.empty_like(x)\n    out[..., ::2] = x[..., ::2] * cos - x[..., 1::2] * sin\n"
            "    out[..., 1::2] = x[..., 1::2] * cos + x[..., ::2] * sin\n    return out\n"),
        "rotation_matrices": ROPE_HEAD + ROPE_ANGLES + (
            "    R = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)  # (L, d/2, 2, 2)\n"
            "    pairs = x.unflatten(-1, (-1, 2))\n    return torch.einsum('lpij,...lpj->...lpi', R, pairs).flatten(-2)\n"),
    },
    "SwiGLU": {
        "silu": SWIGLU_INIT + "        return self.w2(F.silu(self.w1(x)) * self.w3(x))",
        "sigmoid_by_hand": SWIGLU_INIT + "        a = self.w1(x)\n        return self.w2(a * torch.sigmoid(a) * self.w3(x))",
        "silu_module": SWIGLU_INIT + "        gate, up = self.w1(x), self.w3(x)\n        return self.w2(nn.SiLU()(gate) * up)",
    },
    "repeat_kv": {
        "repeat_interleave": "def repeat_kv(x, n_rep):\n    return torch.repeat_interleave(x, n_rep, dim=1)",
        "expand_reshape": "def repeat_kv(x, n_rep):\n    B, h, L, d = x.shape\n    if n_rep == 1:\n        return x\n    return x[:, :, None].expand(B, h, n_rep, L, d).reshape(B, h * n_rep, L, d)",
        "index_select": "def repeat_kv(x, n_rep):\n    heads = torch.arange(x.size(1) * n_rep) // n_rep\n    return x.index_select(1, heads)",
    },
    "GroupedQueryAttention": {
        "by_hand": GQA_OK,
        "sdpa": GQA_OK.replace(
            "        s = q @ repeat_kv(k, n).transpose(-2, -1) / math.sqrt(self.d_head)\n", "").replace(
            "        w = s.masked_fill(~mask, float('-inf')).softmax(-1)\n        out = (w @ repeat_kv(v, n))",
            "        out = F.scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n), attn_mask=mask)\n        out = (out)"),
        "sdpa_enable_gqa": GQA_OK.replace(
            "        s = q @ repeat_kv(k, n).transpose(-2, -1) / math.sqrt(self.d_head)\n", "").replace(
            "        w = s.masked_fill(~mask, float('-inf')).softmax(-1)\n        out = (w @ repeat_kv(v, n))",
            "        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)\n        out = (out)"),
        "grouped_einsum": GQA_OK.replace(
            "        s = q @ repeat_kv(k, n).transpose(-2, -1) / math.sqrt(self.d_head)\n",
            "        qg = q.view(B, self.num_kv_heads, n, L, self.d_head)\n"
            "        s = torch.einsum('bgnqd,bgkd->bgnqk', qg, k) / math.sqrt(self.d_head)\n").replace(
            "        out = (w @ repeat_kv(v, n)).transpose(1, 2).reshape(B, L, D)\n",
            "        out = torch.einsum('bgnqk,bgkd->bgnqd', w, v).reshape(B, self.num_heads, L, self.d_head)\n"
            "        out = out.transpose(1, 2).reshape(B, L, D)\n"),
    },
    "online_softmax_attention": {
        "running_sums": TILES_OK,
        "float64_inside": TILES_OK.replace("    Lq, Lk = query.shape[-2], key.shape[-2]\n",
                                           "    dtype = query.dtype\n    query, key, value = query.double(), key.double(), value.double()\n"
                                           "    Lq, Lk = query.shape[-2], key.shape[-2]\n").replace(
            "    return acc / l\n", "    return (acc / l).to(dtype)\n"),
        "query_and_key_blocks": TILES_HEAD + (
            "    Lq, Lk = query.shape[-2], key.shape[-2]\n    outs = []\n"
            "    for qs in range(0, Lq, tile_size):\n        q = query[..., qs:qs + tile_size, :]\n"
            "        qpos = torch.arange(qs, qs + q.shape[-2], device=q.device)[:, None] + Lk - Lq\n"
            "        m = torch.full(q.shape[:-1] + (1,), float('-inf'), dtype=q.dtype, device=q.device)\n        l = torch.zeros_like(m)\n"
            "        acc = torch.zeros(q.shape[:-1] + (value.shape[-1],), dtype=q.dtype, device=q.device)\n"
            "        for s in range(0, Lk, tile_size):\n            if causal and s > qpos.max():\n                break  # the tiles after the diagonal\n"
            "            kt, vt = key[..., s:s + tile_size, :], value[..., s:s + tile_size, :]\n"
            "            sc = q @ kt.transpose(-1, -2) / math.sqrt(q.shape[-1])\n"
            "            if causal:\n                sc = sc.masked_fill(torch.arange(s, s + kt.shape[-2], device=key.device)[None, :] > qpos, float('-inf'))\n"
            "            m_new = torch.maximum(m, sc.amax(-1, keepdim=True))\n"
            "            c = torch.exp(m - m_new)\n            p = torch.exp(sc - m_new)\n"
            "            l = l * c + p.sum(-1, keepdim=True)\n            acc = acc * c + p @ vt\n            m = m_new\n"
            "        outs.append(acc / l)\n    return torch.cat(outs, -2)\n"),
        "log_sum_exp": TILES_HEAD + (
            "    scale = 1 / math.sqrt(query.size(-1))\n    Lq, Lk = query.size(-2), key.size(-2)\n"
            "    lse = torch.full((*query.shape[:-1], 1), float('-inf'), dtype=query.dtype, device=query.device)\n    out = None\n"
            "    rows = torch.arange(Lq, device=query.device)[:, None] + (Lk - Lq)\n"
            "    for s in range(0, Lk, tile_size):\n        sc = query @ key[..., s:s + tile_size, :].mT * scale\n"
            "        if causal:\n            sc = sc.masked_fill(torch.arange(s, s + sc.size(-1), device=sc.device) > rows, float('-inf'))\n"
            "        tile_lse = torch.logsumexp(sc, -1, keepdim=True)\n        new = torch.logaddexp(lse, tile_lse)\n"
            "        part = torch.nan_to_num(torch.exp(sc - tile_lse)) @ value[..., s:s + tile_size, :]\n"
            "        wa, wb = torch.nan_to_num(torch.exp(lse - new)), torch.nan_to_num(torch.exp(tile_lse - new))\n"
            "        out = part * wb if out is None else out * wa + part * wb\n        lse = new\n"
            "    return out\n"),
    },
    "DecoderBlock": {
        "two_steps": BLOCK_INIT + "        h, kv = self.attn(self.attn_norm(x), past_kv)\n        x = x + h\n        return x + self.ffn(self.ffn_norm(x)), kv",
        "named_branches": BLOCK_INIT + "        attended, cache = self.attn(self.attn_norm(x), past_kv=past_kv)\n        h = x + attended\n        out = h + self.ffn(self.ffn_norm(h))\n        return out, cache",
    },
    "DecoderLM": {
        "assign": LM_OK,
        "tie_other_way_functional": LM_INIT + "        self.embedding.weight = self.lm_head.weight\n" + LM_FORWARD.replace(
            "        return self.lm_head(self.norm(x)), presents\n",
            "        return F.linear(self.norm(x), self.lm_head.weight), presents\n"),
        "zip_layers": LM_OK.replace(
            "        for i, layer in enumerate(self.layers):\n            x, kv = layer(x, None if past_kvs is None else past_kvs[i])\n",
            "        for layer, past in zip(self.layers, past_kvs or [None] * len(self.layers)):\n            x, kv = layer(x, past)\n"),
    },
    "top_p_filter": {
        "scatter_back": TOP_P_OK,
        # Ascending sort, as Hugging Face's TopPLogitsWarper: drop the tokens whose cumulative mass from the
        # bottom is at most 1 - top_p; the row flipped before a stable sort, so that of two equal tokens the
        # later one comes first from the bottom and is dropped first (ties ranked by index, as the text asks).
        "ascending_tail": TOP_P_HEAD + (
            "    v, idx = logits.flip(-1).sort(dim=-1, stable=True)\n    idx = logits.size(-1) - 1 - idx\n"
            "    cum = v.softmax(-1).cumsum(-1)\n    drop = cum <= 1 - top_p\n"
            "    drop[..., -1] = False\n    return logits.masked_fill(drop.scatter(-1, idx, drop), float('-inf'))\n"),
        # The older Hugging Face form (top_k_top_p_filtering), with its guard for top_p = 1.
        "shifted_mask": TOP_P_HEAD + (
            "    if top_p >= 1.0:\n        return logits\n"
            "    v, idx = torch.sort(logits, descending=True, stable=True, dim=-1)\n    cum = torch.softmax(v, -1).cumsum(-1)\n"
            "    drop = cum >= top_p\n    drop[..., 1:] = drop[..., :-1].clone()\n    drop[..., 0] = False\n"
            "    out = logits.clone()\n    out[drop.scatter(-1, idx, drop)] = float('-inf')\n    return out\n"),
    },
    "sample_next_token": {
        "multinomial": SAMPLE_HEAD + "    p = top_p_filter(logits / temperature, top_p).softmax(-1)\n    return torch.multinomial(p, 1).squeeze(-1)",
        "gumbel_max": SAMPLE_HEAD + "    z = top_p_filter(logits / temperature, top_p)\n    g = -torch.log(-torch.log(torch.rand_like(z).clamp_min(1e-20)))\n    return (z + g).argmax(-1)",
        "inverse_cdf": SAMPLE_HEAD + "    p = top_p_filter(logits / temperature, top_p).softmax(-1)\n    u = torch.rand(p.shape[:-1] + (1,), device=p.device)\n    idx = torch.searchsorted(p.cumsum(-1), u).squeeze(-1)\n    return idx.clamp(max=p.size(-1) - 1)",
    },
    "generate": {
        "cache": GENERATE_HEAD + (
            "    logits, past = model(prompt)\n    out = prompt\n    for _ in range(max_new_tokens):\n"
            "        nxt = sample_next_token(logits[:, -1], temperature, top_p)\n"
            "        out = torch.cat([out, nxt[:, None]], 1)\n        logits, past = model(nxt[:, None], past)\n    return out\n"),
        "preallocated": GENERATE_HEAD + (
            "    B, L0 = prompt.shape\n    out = torch.empty(B, L0 + max_new_tokens, dtype=torch.long)\n    out[:, :L0] = prompt\n"
            "    logits, cache = model(prompt, None)\n    for t in range(L0, L0 + max_new_tokens):\n"
            "        out[:, t] = sample_next_token(logits[:, -1, :], temperature=temperature, top_p=top_p)\n"
            "        if t + 1 < L0 + max_new_tokens:\n            logits, cache = model(out[:, t:t + 1], cache)\n    return out\n"),
    },
})

MISTAKES.update({
    "RMSNorm": {
        "layer_norm": (RMS_INIT + "        m = x.mean(-1, keepdim=True)\n        return (x - m) / torch.sqrt((x - m).pow(2).mean(-1, keepdim=True) + self.eps) * self.weight", "that is LayerNorm"),
        "eps_outside": (RMS_INIT + "        return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + self.eps) * self.weight", "outside the square root"),
        "no_gain": (RMS_INIT + "        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)", "`weight` is not applied"),
        "norm_not_rms": (RMS_INIT + "        return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + self.eps) * self.weight", "MEAN of the squares"),
        "fixed_eps": (RMS_INIT + "        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight", "eps is ignored"),
        "abs_mean": (RMS_INIT + "        return x / (x.abs().mean(-1, keepdim=True) + self.eps) * self.weight", "mean of |x|"),
    },
    "apply_rotary_embedding": {
        "rotate_half": (ROPE_HEAD + ROPE_ANGLES + "    h = x.size(-1) // 2\n    a, b = x[..., :h], x[..., h:]\n    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)\n", "rotate_half"),
        "wrong_direction": (ROPE_OK.replace("a * cos - b * sin, a * sin + b * cos", "a * cos + b * sin, b * cos - a * sin"), "wrong way"),
        "exponent_i": (ROPE_OK.replace("torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d", "torch.arange(d // 2, dtype=torch.float64, device=x.device) / d"), "base^(-i/d)"),
        "arange_positions": (ROPE_OK.replace("positions.to(x.device).double()[:, None]", "torch.arange(x.size(-2), device=x.device).double()[:, None]"), "positions given are ignored"),
        "fixed_base": (ROPE_OK.replace("theta = base **", "theta = 10000.0 **"), "`base` argument is ignored"),
        "llama3_base": (ROPE_OK.replace("theta = base **", "theta = 500000.0 **"), "base 500000"),
        # A product that should be outer written elementwise, or as an einsum with one index for both.
        "angles_elementwise": (ROPE_OK.replace("positions.to(x.device).double()[:, None] * theta", "positions.to(x.device).double() * theta"),
                               "elementwise product"),
        "einsum_diagonal": (ROPE_OK.replace("positions.to(x.device).double()[:, None] * theta",
                                            "torch.einsum('i,i->i', positions.to(x.device).double(), theta)"), "takes the diagonal"),
        "table_on_cpu": (ROPE_OK.replace(", device=x.device", "").replace("positions.to(x.device)", "positions"),
                         "is made on the CPU"),
    },
    "SwiGLU": {
        "gate_on_w3": (SWIGLU_INIT + "        return self.w2(self.w1(x) * F.silu(self.w3(x)))", "SiLU is applied to w3(x)"),
        "relu": (SWIGLU_INIT + "        return self.w2(torch.relu(self.w1(x)) * self.w3(x))", "ReLU is used"),
        "glu_sigmoid": (SWIGLU_INIT + "        return self.w2(torch.sigmoid(self.w1(x)) * self.w3(x))", "original GLU"),
        "no_gate": (SWIGLU_INIT + "        return self.w2(F.silu(self.w1(x)))", "there is no gate"),
    },
    "repeat_kv": {
        "tiled": ("def repeat_kv(x, n_rep):\n    return x.repeat(1, n_rep, 1, 1)", "repeated as a whole"),
        "length_axis": ("def repeat_kv(x, n_rep):\n    B, h, L, d = x.shape\n    return x.repeat_interleave(n_rep, dim=2).reshape(B, h * n_rep, L, d)", "length axis"),
    },
    "GroupedQueryAttention": {
        "rope_on_values": (GQA_OK.replace("        if past_kv is not None:\n", "        v = apply_rotary_embedding(v, pos, self.rope_base)\n        if past_kv is not None:\n", 1), "values are rotated too"),
        "positions_restart": (GQA_OK.replace("        pos = torch.arange(P, P + L, device=x.device)\n", "        pos = torch.arange(L)\n"), "rotated as positions 0"),
        "rerotate_cache": (GQA_OK.replace(
            "        q, k = apply_rotary_embedding(q, pos, self.rope_base), apply_rotary_embedding(k, pos, self.rope_base)\n"
            "        if past_kv is not None:\n            k = torch.cat([past_kv[0], k], dim=2)\n",
            "        q = apply_rotary_embedding(q, pos, self.rope_base)\n"
            "        if past_kv is not None:\n            k = torch.cat([past_kv[0], k], dim=2)\n").replace(
            "        n = self.num_heads // self.num_kv_heads\n",
            "        k = apply_rotary_embedding(k, torch.arange(P + L), self.rope_base)\n"
            "        n = self.num_heads // self.num_kv_heads\n"), "rotated again"),
        "mask_not_shifted": (GQA_OK.replace(".tril(P)", ".tril()"), "not shifted"),
        # Query heads grouped as (repeats, kv heads) where the layout is (kv heads, repeats): head i meets
        # key/value head i % num_kv_heads, as tiling does.
        "einsum_groups_swapped": (GQA_OK.replace(
            "        s = q @ repeat_kv(k, n).transpose(-2, -1) / math.sqrt(self.d_head)\n",
            "        qg = q.view(B, n, self.num_kv_heads, L, self.d_head)\n"
            "        s = torch.einsum('bngqd,bgkd->bngqk', qg, k) / math.sqrt(self.d_head)\n").replace(
            "        out = (w @ repeat_kv(v, n)).transpose(1, 2).reshape(B, L, D)\n",
            "        out = torch.einsum('bngqk,bgkd->bngqd', w, v).reshape(B, self.num_heads, L, self.d_head)\n"
            "        out = out.transpose(1, 2).reshape(B, L, D)\n"), "whole list"),
        # Made on the CPU: on a GPU, masked_fill with this mask raises (caught on the meta device).
        "mask_on_cpu": (GQA_OK.replace("dtype=torch.bool, device=x.device)", "dtype=torch.bool)"), "is made on the CPU"),
        "tiled_heads": (GQA_OK.replace("repeat_kv(k, n)", "k.repeat(1, n, 1, 1)").replace("repeat_kv(v, n)", "v.repeat(1, n, 1, 1)"), "whole list"),
        "scale_d_model": (GQA_OK.replace("/ math.sqrt(self.d_head)", "/ math.sqrt(D)"), "1/sqrt(d_model)"),
    },
    "online_softmax_attention": {
        "state_on_cpu": (TILES_OK.replace(", device=query.device)", ")"), "is made on the CPU"),
        "acc_not_rescaled": (TILES_OK.replace("acc = acc * c + p @ vt", "acc = acc + p @ vt"), "running output is not rescaled"),
        "sum_not_rescaled": (TILES_OK.replace("l = l * c + p.sum(-1, keepdim=True)", "l = l + p.sum(-1, keepdim=True)"), "running sum is not rescaled"),
        "causal_from_start": (TILES_OK.replace("qpos = torch.arange(Lq, device=query.device)[:, None] + Lk - Lq", "qpos = torch.arange(Lq, device=query.device)[:, None]"), "LAST L_q positions"),
        "no_scale": (TILES_OK.replace("scale = query.shape[-1] ** -0.5", "scale = 1.0"), "not scaled by 1/sqrt(d)"),
    },
    "DecoderBlock": {
        "post_ln": (BLOCK_INIT + "        h, kv = self.attn(x, past_kv)\n        x = self.attn_norm(x + h)\n        return self.ffn_norm(x + self.ffn(x)), kv", "post-LN"),
        "normalised_stream": (BLOCK_INIT + "        x = self.attn_norm(x)\n        h, kv = self.attn(x, past_kv)\n        x = self.ffn_norm(x + h)\n        return x + self.ffn(x), kv", "replaces the residual stream"),
        "parallel": (BLOCK_INIT + "        h, kv = self.attn(self.attn_norm(x), past_kv)\n        return x + h + self.ffn(self.ffn_norm(x)), kv", "parallel block"),
        "one_norm": (BLOCK_INIT + "        h, kv = self.attn(self.attn_norm(x), past_kv)\n        x = x + h\n        return x + self.ffn(self.attn_norm(x)), kv", "attn_norm is used before the feed-forward too"),
    },
    "DecoderLM": {
        "copied_weight": (LM_INIT + "        self.lm_head.weight = nn.Parameter(self.embedding.weight.clone())\n" + LM_FORWARD.replace(
            "        nn.init.normal_(self.embedding.weight, std=0.02)\n", "        nn.init.normal_(self.embedding.weight, std=0.02)\n        self.lm_head.weight.data = self.embedding.weight.data.clone()\n"), "COPY"),
        "scaled_embeddings": (LM_OK.replace("        x = self.embedding(tokens)\n", "        x = self.embedding(tokens) * math.sqrt(self.embedding.embedding_dim)\n"), "sqrt(d_model)"),
        "no_final_norm": (LM_OK.replace("self.lm_head(self.norm(x))", "self.lm_head(x)"), "final RMSNorm"),
    },
    "top_p_filter": {
        # The text's rule without its exception for top_p = 1: a float32 running sum over 50,000 tokens passes 1.
        "running_sum_at_one": (TOP_P_OK.replace("    if top_p == 1:\n        return logits\n", ""), "top_p = 1 keeps every token"),
        "drops_crossing_token": (TOP_P_OK.replace("keep = (p.cumsum(-1) - p) < top_p", "keep = p.cumsum(-1) < top_p"), "crosses top_p is dropped"),
        # The text ranks ties by index; torch.sort without stable=True reorders ties in long rows (issue 39).
        "unstable_sort": (TOP_P_OK.replace(", stable=True", ""), "stable"),
        # The ascending sort without the flip: right except at ties, where it keeps the LATER of two equal tokens.
        "ascending_tail_ties": (TOP_P_HEAD + (
            "    v, idx = logits.sort(dim=-1)\n    cum = v.softmax(-1).cumsum(-1)\n    drop = cum <= 1 - top_p\n"
            "    drop[..., -1] = False\n    return logits.masked_fill(drop.scatter(-1, idx, drop), float('-inf'))\n"),
            "stable"),
        "sorted_order": (TOP_P_OK.replace("    return logits.masked_fill(~torch.zeros_like(keep).scatter(-1, idx, keep), float('-inf'))\n",
                                          "    return v.masked_fill(~keep, float('-inf'))\n"), "sorted order"),
        "zero_fill": (TOP_P_OK.replace("float('-inf'))\n", "0.0)\n"), "get 0"),
        "returns_probabilities": (TOP_P_OK.replace("    return logits.masked_fill(", "    return logits.softmax(-1).masked_fill(").replace("float('-inf'))\n", "0.0)\n"), "probabilities are returned"),
    },
    "sample_next_token": {
        "rand_on_cpu": (SAMPLE_HEAD + "    p = top_p_filter(logits / temperature, top_p).softmax(-1)\n    u = torch.rand(p.shape[:-1] + (1,))\n    idx = torch.searchsorted(p.cumsum(-1), u).squeeze(-1)\n    return idx.clamp(max=p.size(-1) - 1)", "is made on the CPU"),
        "temperature_after_top_p": (SAMPLE_HEAD + "    p = (top_p_filter(logits, top_p) / temperature).softmax(-1)\n    return torch.multinomial(p, 1).squeeze(-1)", "after top_p chose"),
        "top_p_ignored": (SAMPLE_HEAD + "    p = (logits / temperature).softmax(-1)\n    return torch.multinomial(p, 1).squeeze(-1)", "top_p is ignored"),
        "times_temperature": (SAMPLE_HEAD + "    p = top_p_filter(logits * temperature, top_p).softmax(-1)\n    return torch.multinomial(p, 1).squeeze(-1)", "multiplied by the temperature"),
    },
    "generate": {
        "no_cache": (GENERATE_HEAD + "    out = prompt\n    for _ in range(max_new_tokens):\n        logits, _ = model(out)\n"
                     "        out = torch.cat([out, sample_next_token(logits[:, -1], temperature, top_p)[:, None]], 1)\n    return out\n", "whole text at every step"),
        "whole_text_with_cache": (GENERATE_HEAD + "    out = prompt\n    past = None\n    for _ in range(max_new_tokens):\n        logits, past = model(out, past)\n"
                                  "        out = torch.cat([out, sample_next_token(logits[:, -1], temperature, top_p)[:, None]], 1)\n    return out\n", "counted twice"),
        "temperature_dropped": (GENERATE_HEAD + (
            "    logits, past = model(prompt)\n    out = prompt\n    for _ in range(max_new_tokens):\n"
            "        nxt = sample_next_token(logits[:, -1])\n"
            "        out = torch.cat([out, nxt[:, None]], 1)\n        logits, past = model(nxt[:, None], past)\n    return out\n"),
            "on to sample_next_token"),
        "first_position": (GENERATE_HEAD + (
            "    logits, past = model(prompt)\n    out = prompt\n    for _ in range(max_new_tokens):\n"
            "        nxt = sample_next_token(logits[:, 0], temperature, top_p)\n"
            "        out = torch.cat([out, nxt[:, None]], 1)\n        logits, past = model(nxt[:, None], past)\n    return out\n"), "FIRST position"),
        "only_new_tokens": (GENERATE_HEAD + (
            "    logits, past = model(prompt)\n    new = []\n    for _ in range(max_new_tokens):\n"
            "        nxt = sample_next_token(logits[:, -1], temperature, top_p)\n"
            "        new.append(nxt)\n        logits, past = model(nxt[:, None], past)\n    return torch.stack(new, 1)\n"), "only the new tokens"),
    },
})

CHECKS.update({name: ("nb08", [f"check_{name}"]) for name in [
    "RMSNorm", "apply_rotary_embedding", "SwiGLU", "repeat_kv", "GroupedQueryAttention", "online_softmax_attention",
    "DecoderBlock", "DecoderLM", "top_p_filter", "sample_next_token", "generate"]})
