"""Catalogue of correct variants and real mistakes, per exercise, as answer-cell code.

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
        "additive_bias_float64": "def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    q, k = query.double(), key.double()\n    s = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5\n    if mask is not None:\n        s = s + torch.zeros(mask.shape, dtype=s.dtype).masked_fill(~mask, float('-inf'))\n    w = torch.softmax(s, -1)\n    w = torch.where(torch.isnan(w), torch.zeros_like(w), w).to(query.dtype)\n    if dropout_p:\n        w = torch.nn.Dropout(dropout_p)(w)\n    return w @ value, w",
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
        "no_normalisation": ("def softmax(x, dim=-1):\n    return x.exp()", "without dividing"),
    },
    "attention_scores": {
        "swapped": ("def attention_scores(query, key):\n    return key @ query.transpose(-2, -1)", "axes swapped"),
        "scaled": ("def attention_scores(query, key):\n    return query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))", "scaled by 1/sqrt(d_k)"),
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
        "inverted_mask": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(mask, float('-inf'))\n    w = torch.nan_to_num(s.softmax(-1))\n    return w @ value, w", "mask is inverted"),
        "ignores_mask": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    w = (query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))).softmax(-1)\n    return w @ value, w", "mask is ignored"),
        "nan_rows": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n    w = s.softmax(-1)\n    return w @ value, w", "NaN"),
        "uniform_rows": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(~mask, -1e9)\n    w = s.softmax(-1)\n    return w @ value, w", "-1e9"),
        "dropout_not_rescaled": ("def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))\n    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n    w = torch.nan_to_num(s.softmax(-1))\n    if dropout_p > 0:\n        w = w * (torch.rand_like(w) > dropout_p)\n    return w @ value, w", "1/(1 - p)"),
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
