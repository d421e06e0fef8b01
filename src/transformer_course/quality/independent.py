# ruff: noqa: E501 (students' answers, kept as handed in)
"""Answers written independently, as students write them: the honest class the similarity report is
measured against (issue 38), where the catalogues' variants share a head written once.

Four helpers, each with a fresh context and given only the student release of notebooks 01-06 and
`transformer-course check`, filled in every exercise in a style of their own: ``alice`` compact (chained
methods, ``einsum``, short names), ``bruno`` explicit (one step a line, function forms, comments),
``carol`` a careful beginner (long names, ``torch.matmul`` and ``F.softmax``, loops where natural, her own
comments; 2026-11-26), ``dmitri`` terse (``einsum``, ``.mT``, tensor methods, one-letter names, helpers and
lambdas, no comments; 2026-11-26). Every answer scored full marks with `check` when it was written, and
``tests/test_checks.py`` checks each again. Kept as handed in: whole answer cells, the stub's signature and
docstring included. Notebook order.
"""

from __future__ import annotations

ANSWERS: dict[str, dict[str, str]] = {
    'softmax': {
        'alice': r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of ``x`` along ``dim``, written by hand.

    Args:
        x: floating tensor of any shape.
        dim: the axis whose entries become probabilities.

    Returns:
        A tensor of the same shape and dtype; entries along ``dim`` are >= 0 and sum to 1.
    """
    # YOUR CODE HERE
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)''',
        'bruno': r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of ``x`` along ``dim``, written by hand.

    Args:
        x: floating tensor of any shape.
        dim: the axis whose entries become probabilities.

    Returns:
        A tensor of the same shape and dtype; entries along ``dim`` are >= 0 and sum to 1.
    """
    # YOUR CODE HERE
    # Largest entry along dim; keepdim so it broadcasts back against x
    max_values = x.amax(dim=dim, keepdim=True)
    # Shift so every exponent is <= 0 (no overflow)
    shifted = x - max_values
    exponentials = torch.exp(shifted)
    totals = torch.sum(exponentials, dim=dim, keepdim=True)
    probabilities = exponentials / totals
    return probabilities''',
        'carol': r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of ``x`` along ``dim``, written by hand.

    Args:
        x: floating tensor of any shape.
        dim: the axis whose entries become probabilities.

    Returns:
        A tensor of the same shape and dtype; entries along ``dim`` are >= 0 and sum to 1.
    """
    # largest entry along dim, kept as a size-1 axis so it broadcasts back
    max_along_dim = torch.amax(x, dim=dim, keepdim=True)
    # shift so every exponent is <= 0 (no overflow)
    shifted_x = x - max_along_dim
    exponentials = torch.exp(shifted_x)
    # normalise so the entries along dim sum to one
    sum_of_exponentials = torch.sum(exponentials, dim=dim, keepdim=True)
    probabilities = exponentials / sum_of_exponentials
    return probabilities''',
        'dmitri': r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of ``x`` along ``dim``, written by hand.

    Args:
        x: floating tensor of any shape.
        dim: the axis whose entries become probabilities.

    Returns:
        A tensor of the same shape and dtype; entries along ``dim`` are >= 0 and sum to 1.
    """
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)
''',
    },
    'attention_scores': {
        'alice': r'''def attention_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Dot product of every query with every key.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.

    Returns:
        ``(..., Lq, Lk)`` with entry ``[i, j] = query[i] . key[j]``.
    """
    # YOUR CODE HERE
    return query @ key.transpose(-2, -1)''',
        'bruno': r'''def attention_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Dot product of every query with every key.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.

    Returns:
        ``(..., Lq, Lk)`` with entry ``[i, j] = query[i] . key[j]``.
    """
    # YOUR CODE HERE
    # Swap only the last two axes of key: (..., Lk, d_k) -> (..., d_k, Lk)
    key_transposed = torch.transpose(key, -2, -1)
    # (..., Lq, d_k) @ (..., d_k, Lk) -> (..., Lq, Lk)
    scores = torch.matmul(query, key_transposed)
    return scores''',
        'carol': r'''def attention_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Dot product of every query with every key.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.

    Returns:
        ``(..., Lq, Lk)`` with entry ``[i, j] = query[i] . key[j]``.
    """
    # swap only the last two axes of key: (..., Lk, d_k) -> (..., d_k, Lk)
    key_transposed = torch.transpose(key, -2, -1)
    # (..., Lq, d_k) times (..., d_k, Lk) -> (..., Lq, Lk)
    scores = torch.matmul(query, key_transposed)
    return scores''',
        'dmitri': r'''def attention_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Dot product of every query with every key.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.

    Returns:
        ``(..., Lq, Lk)`` with entry ``[i, j] = query[i] . key[j]``.
    """
    return torch.einsum('...qd,...kd->...qk', query, key)
''',
    },
    'self_attention': {
        'alice': r'''def self_attention(
    x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor
) -> torch.Tensor:
    """Unscaled dot-product self-attention, ``softmax(Q K^T) V``.

    Args:
        x: ``(B, L, D)`` token vectors.
        w_q, w_k: ``(D, d_k)`` query and key projections.
        w_v: ``(D, d_v)`` value projection.

    Returns:
        ``(B, L, d_v)``.
    """
    # YOUR CODE HERE
    w = softmax(attention_scores(x @ w_q, x @ w_k), dim=-1)
    return w @ (x @ w_v)''',
        'bruno': r'''def self_attention(
    x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor
) -> torch.Tensor:
    """Unscaled dot-product self-attention, ``softmax(Q K^T) V``.

    Args:
        x: ``(B, L, D)`` token vectors.
        w_q, w_k: ``(D, d_k)`` query and key projections.
        w_v: ``(D, d_v)`` value projection.

    Returns:
        ``(B, L, d_v)``.
    """
    # YOUR CODE HERE
    # Project the same tokens into queries, keys and values
    query = torch.matmul(x, w_q)  # (B, L, d_k)
    key = torch.matmul(x, w_k)  # (B, L, d_k)
    value = torch.matmul(x, w_v)  # (B, L, d_v)
    # Every query against every key, no scale here
    scores = attention_scores(query, key)  # (B, L, L)
    # Softmax over the keys: each query's row sums to 1
    weights = softmax(scores, dim=-1)  # (B, L, L)
    # Weighted average of the values
    output = torch.matmul(weights, value)  # (B, L, d_v)
    return output''',
        'carol': r'''def self_attention(
    x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor
) -> torch.Tensor:
    """Unscaled dot-product self-attention, ``softmax(Q K^T) V``.

    Args:
        x: ``(B, L, D)`` token vectors.
        w_q, w_k: ``(D, d_k)`` query and key projections.
        w_v: ``(D, d_v)`` value projection.

    Returns:
        ``(B, L, d_v)``.
    """
    # project the same tokens three ways
    queries = torch.matmul(x, w_q)  # (B, L, d_k)
    keys = torch.matmul(x, w_k)  # (B, L, d_k)
    values = torch.matmul(x, w_v)  # (B, L, d_v)
    # how well each query matches each key
    scores = attention_scores(queries, keys)  # (B, L, L)
    # each query spreads one unit of attention over the keys
    attention_weights = softmax(scores, dim=-1)
    # weighted average of the value rows
    output = torch.matmul(attention_weights, values)  # (B, L, d_v)
    return output''',
        'dmitri': r'''def self_attention(
    x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor
) -> torch.Tensor:
    """Unscaled dot-product self-attention, ``softmax(Q K^T) V``.

    Args:
        x: ``(B, L, D)`` token vectors.
        w_q, w_k: ``(D, d_k)`` query and key projections.
        w_v: ``(D, d_v)`` value projection.

    Returns:
        ``(B, L, d_v)``.
    """
    return softmax(attention_scores(x @ w_q, x @ w_k), dim=-1) @ (x @ w_v)
''',
    },
    'SelfAttention': {
        'alice': r'''class SelfAttention(nn.Module):
    """Single-head self-attention with learned projections (no bias, no scale).

    Args:
        d_model: size ``D`` of the input vectors.
        d_k: size of queries and keys (default ``d_model``).
        d_v: size of values and of the output (default ``d_model``).

    Shape:
        forward(x): ``x (B, L, D)`` -> ``(out (B, L, d_v), weights (B, L, L))``.
    """

    def __init__(self, d_model: int, d_k: int | None = None, d_v: int | None = None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        d_v = d_model if d_v is None else d_v
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # YOUR CODE HERE
        w = softmax(attention_scores(self.w_q(x), self.w_k(x)), dim=-1)
        return w @ self.w_v(x), w''',
        'bruno': r'''class SelfAttention(nn.Module):
    """Single-head self-attention with learned projections (no bias, no scale).

    Args:
        d_model: size ``D`` of the input vectors.
        d_k: size of queries and keys (default ``d_model``).
        d_v: size of values and of the output (default ``d_model``).

    Shape:
        forward(x): ``x (B, L, D)`` -> ``(out (B, L, d_v), weights (B, L, L))``.
    """

    def __init__(self, d_model: int, d_k: int | None = None, d_v: int | None = None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        d_v = d_model if d_v is None else d_v
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # YOUR CODE HERE
        # Learned projections (nn.Linear computes x @ weight.T)
        query = self.w_q(x)  # (B, L, d_k)
        key = self.w_k(x)  # (B, L, d_k)
        value = self.w_v(x)  # (B, L, d_v)
        scores = attention_scores(query, key)  # (B, L, L)
        weights = softmax(scores, dim=-1)  # (B, L, L)
        output = torch.matmul(weights, value)  # (B, L, d_v)
        return output, weights''',
        'carol': r'''class SelfAttention(nn.Module):
    """Single-head self-attention with learned projections (no bias, no scale).

    Args:
        d_model: size ``D`` of the input vectors.
        d_k: size of queries and keys (default ``d_model``).
        d_v: size of values and of the output (default ``d_model``).

    Shape:
        forward(x): ``x (B, L, D)`` -> ``(out (B, L, d_v), weights (B, L, L))``.
    """

    def __init__(self, d_model: int, d_k: int | None = None, d_v: int | None = None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        d_v = d_model if d_v is None else d_v
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # learned projections of the same input
        queries = self.w_q(x)  # (B, L, d_k)
        keys = self.w_k(x)  # (B, L, d_k)
        values = self.w_v(x)  # (B, L, d_v)
        # scores and weights over the keys
        scores = attention_scores(queries, keys)  # (B, L, L)
        attention_weights = softmax(scores, dim=-1)
        # mix the values with the weights
        output = torch.matmul(attention_weights, values)  # (B, L, d_v)
        return output, attention_weights''',
        'dmitri': r'''class SelfAttention(nn.Module):
    """Single-head self-attention with learned projections (no bias, no scale).

    Args:
        d_model: size ``D`` of the input vectors.
        d_k: size of queries and keys (default ``d_model``).
        d_v: size of values and of the output (default ``d_model``).

    Shape:
        forward(x): ``x (B, L, D)`` -> ``(out (B, L, d_v), weights (B, L, L))``.
    """

    def __init__(self, d_model: int, d_k: int | None = None, d_v: int | None = None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        d_v = d_model if d_v is None else d_v
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = softmax(attention_scores(self.w_q(x), self.w_k(x)), dim=-1)
        return a @ self.w_v(x), a
''',
    },
    'scaled_dot_product_attention': {
        'alice': r'''def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention, Vaswani et al. (2017) eq. 1.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.
        value: ``(..., Lk, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., Lq, Lk)``; True = may attend.
        dropout_p: dropout probability on the weights, applied whenever > 0.

    Returns:
        ``(output (..., Lq, d_v), weights (..., Lq, Lk))``.
    """
    # YOUR CODE HERE
    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = s.softmax(-1)
    if mask is not None:
        w = w.masked_fill(~mask, 0.0)
    if dropout_p > 0:
        w = F.dropout(w, dropout_p)
    return w @ value, w''',
        'bruno': r'''def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention, Vaswani et al. (2017) eq. 1.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.
        value: ``(..., Lk, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., Lq, Lk)``; True = may attend.
        dropout_p: dropout probability on the weights, applied whenever > 0.

    Returns:
        ``(output (..., Lq, d_v), weights (..., Lq, Lk))``.
    """
    # YOUR CODE HERE
    # Size of queries and keys, used for the scale
    d_k = query.size(-1)
    scale = 1.0 / math.sqrt(d_k)

    # Raw scores (..., Lq, Lk), then scaled so their variance does not grow with d_k
    key_transposed = torch.transpose(key, -2, -1)
    scores = torch.matmul(query, key_transposed)
    scores = scores * scale

    # Replace (not add) blocked scores with -inf, so no NaN reaches the gradient
    if mask is not None:
        blocked = torch.logical_not(mask)
        scores = scores.masked_fill(blocked, float("-inf"))

    # Softmax over the keys
    weights = torch.softmax(scores, dim=-1)

    # Blocked weights become exactly 0; a fully blocked row (NaN after softmax) becomes all 0
    if mask is not None:
        weights = weights.masked_fill(blocked, 0.0)

    # Dropout on the weights, only when asked for
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)

    # Weighted sum of the values (..., Lq, d_v)
    output = torch.matmul(weights, value)
    return output, weights''',
        'carol': r'''def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention, Vaswani et al. (2017) eq. 1.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.
        value: ``(..., Lk, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., Lq, Lk)``; True = may attend.
        dropout_p: dropout probability on the weights, applied whenever > 0.

    Returns:
        ``(output (..., Lq, d_v), weights (..., Lq, Lk))``.
    """
    # size of the queries and keys
    d_k = query.shape[-1]
    # raw dot products of every query with every key: (..., Lq, Lk)
    key_transposed = torch.transpose(key, -2, -1)
    raw_scores = torch.matmul(query, key_transposed)
    # divide by sqrt(d_k) so the spread does not grow with d_k
    scaled_scores = raw_scores / math.sqrt(d_k)
    if mask is not None:
        # replace (not add) the blocked scores with -inf so they get weight 0
        blocked_positions = torch.logical_not(mask)
        scaled_scores = torch.masked_fill(scaled_scores, blocked_positions, float('-inf'))
    # softmax over the keys
    attention_weights = F.softmax(scaled_scores, dim=-1)
    if mask is not None:
        # zero every blocked weight again: this also turns NaN rows (nothing allowed) into zeros
        attention_weights = torch.masked_fill(attention_weights, blocked_positions, 0.0)
    if dropout_p > 0:
        # drop some weights and rescale the rest by 1/(1-p)
        attention_weights = F.dropout(attention_weights, p=dropout_p, training=True)
    # weighted average of the values: (..., Lq, d_v)
    output = torch.matmul(attention_weights, value)
    return output, attention_weights''',
        'dmitri': r'''def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention, Vaswani et al. (2017) eq. 1.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.
        value: ``(..., Lk, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., Lq, Lk)``; True = may attend.
        dropout_p: dropout probability on the weights, applied whenever > 0.

    Returns:
        ``(output (..., Lq, d_v), weights (..., Lq, Lk))``.
    """
    s = torch.einsum('...qd,...kd->...qk', query, key) / math.sqrt(query.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
    a = s.softmax(dim=-1)
    if mask is not None:
        a = a.masked_fill(~mask, 0.0)
    if dropout_p > 0:
        a = F.dropout(a, p=dropout_p)
    return torch.einsum('...qk,...kd->...qd', a, value), a
''',
    },
    'split_heads': {
        'alice': r'''def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut each position's vector into ``num_heads`` slices, heads first.

    Args:
        x: ``(B, L, D)`` with ``D`` divisible by ``num_heads``.
        num_heads: ``h``.

    Returns:
        ``(B, h, L, d_k)`` with ``d_k = D // h``; ``out[b, i, p] = x[b, p, i*d_k:(i+1)*d_k]``.
    """
    # YOUR CODE HERE
    B, L, D = x.shape
    return x.view(B, L, num_heads, D // num_heads).transpose(1, 2)''',
        'bruno': r'''def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut each position's vector into ``num_heads`` slices, heads first.

    Args:
        x: ``(B, L, D)`` with ``D`` divisible by ``num_heads``.
        num_heads: ``h``.

    Returns:
        ``(B, h, L, d_k)`` with ``d_k = D // h``; ``out[b, i, p] = x[b, p, i*d_k:(i+1)*d_k]``.
    """
    # YOUR CODE HERE
    batch_size, seq_len, d_model = x.shape
    d_k = d_model // num_heads
    # Cut each position's vector into num_heads slices: (B, L, h, d_k)
    x_sliced = x.view(batch_size, seq_len, num_heads, d_k)
    # Move the head axis in front of the positions: (B, h, L, d_k)
    heads = torch.transpose(x_sliced, 1, 2)
    return heads''',
        'carol': r'''def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut each position's vector into ``num_heads`` slices, heads first.

    Args:
        x: ``(B, L, D)`` with ``D`` divisible by ``num_heads``.
        num_heads: ``h``.

    Returns:
        ``(B, h, L, d_k)`` with ``d_k = D // h``; ``out[b, i, p] = x[b, p, i*d_k:(i+1)*d_k]``.
    """
    batch_size, sequence_length, d_model = x.shape
    head_size = d_model // num_heads
    # first cut each position's vector into h slices: (B, L, h, d_k)
    x_per_position_heads = torch.reshape(x, (batch_size, sequence_length, num_heads, head_size))
    # then move the head axis in front of the positions: (B, h, L, d_k)
    heads_first = torch.transpose(x_per_position_heads, 1, 2)
    return heads_first''',
        'dmitri': r'''def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut each position's vector into ``num_heads`` slices, heads first.

    Args:
        x: ``(B, L, D)`` with ``D`` divisible by ``num_heads``.
        num_heads: ``h``.

    Returns:
        ``(B, h, L, d_k)`` with ``d_k = D // h``; ``out[b, i, p] = x[b, p, i*d_k:(i+1)*d_k]``.
    """
    b, t, d = x.shape
    return x.view(b, t, num_heads, d // num_heads).transpose(1, 2)
''',
    },
    'combine_heads': {
        'alice': r'''def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads of each position (inverse of ``split_heads``).

    Args:
        x: ``(B, h, L, d_k)``.

    Returns:
        ``(B, L, h * d_k)``.
    """
    # YOUR CODE HERE
    return x.transpose(1, 2).flatten(2)''',
        'bruno': r'''def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads of each position (inverse of ``split_heads``).

    Args:
        x: ``(B, h, L, d_k)``.

    Returns:
        ``(B, L, h * d_k)``.
    """
    # YOUR CODE HERE
    batch_size, num_heads, seq_len, d_k = x.shape
    # Back to (B, L, h, d_k)
    x_positions_first = torch.transpose(x, 1, 2)
    # The transpose is non-contiguous, so reshape (copies when needed): (B, L, h * d_k)
    merged = x_positions_first.reshape(batch_size, seq_len, num_heads * d_k)
    return merged''',
        'carol': r'''def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads of each position (inverse of ``split_heads``).

    Args:
        x: ``(B, h, L, d_k)``.

    Returns:
        ``(B, L, h * d_k)``.
    """
    batch_size, num_heads, sequence_length, head_size = x.shape
    # put the positions back in front of the heads: (B, L, h, d_k)
    positions_first = torch.transpose(x, 1, 2)
    # glue the heads of each position together; reshape copies when the memory is not contiguous
    combined = torch.reshape(positions_first, (batch_size, sequence_length, num_heads * head_size))
    return combined''',
        'dmitri': r'''def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads of each position (inverse of ``split_heads``).

    Args:
        x: ``(B, h, L, d_k)``.

    Returns:
        ``(B, L, h * d_k)``.
    """
    return x.transpose(1, 2).flatten(2)
''',
    },
    'MultiHeadAttention': {
        'alice': r'''class MultiHeadAttention(nn.Module):
    """Multi-head attention, Vaswani et al. (2017) section 3.2.2, batch-first.

    Args:
        d_model: model size ``D``.
        num_heads: number of heads ``h``; ``d_k = D // h``.
        dropout: dropout probability on the attention weights (training mode only).
        bias: whether the projections have biases.

    Shape:
        forward(query ``(B, Lq, D)``, key ``(B, Lk, D)``, value ``(B, Lk, D)``, mask bool
        broadcastable to ``(B, h, Lq, Lk)`` with True = attend)
        -> ``(out (B, Lq, D), weights (B, h, Lq, Lk))``.

    Raises:
        ValueError: if ``d_model % num_heads != 0``.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        # Your part of __init__: refuse a d_model that the heads cannot share equally.
        # YOUR CODE HERE
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # YOUR CODE HERE
        h = self.num_heads
        o, w = scaled_dot_product_attention(
            split_heads(self.w_q(query), h), split_heads(self.w_k(key), h), split_heads(self.w_v(value), h),
            mask, self.dropout if self.training else 0.0,
        )
        return self.w_o(combine_heads(o)), w''',
        'bruno': r'''class MultiHeadAttention(nn.Module):
    """Multi-head attention, Vaswani et al. (2017) section 3.2.2, batch-first.

    Args:
        d_model: model size ``D``.
        num_heads: number of heads ``h``; ``d_k = D // h``.
        dropout: dropout probability on the attention weights (training mode only).
        bias: whether the projections have biases.

    Shape:
        forward(query ``(B, Lq, D)``, key ``(B, Lk, D)``, value ``(B, Lk, D)``, mask bool
        broadcastable to ``(B, h, Lq, Lk)`` with True = attend)
        -> ``(out (B, Lq, D), weights (B, h, Lq, Lk))``.

    Raises:
        ValueError: if ``d_model % num_heads != 0``.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        # Your part of __init__: refuse a d_model that the heads cannot share equally.
        # YOUR CODE HERE
        if d_model % num_heads != 0:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by num_heads ({num_heads})"
            )

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # YOUR CODE HERE
        batch_size, query_len, d_model = query.shape

        # 1. Project all heads at once: (B, Lq, D) and (B, Lk, D)
        projected_query = self.w_q(query)
        projected_key = self.w_k(key)
        projected_value = self.w_v(value)

        # 2. Split into heads: (B, h, Lq, d_k) and (B, h, Lk, d_k)
        query_heads = split_heads(projected_query, self.num_heads)
        key_heads = split_heads(projected_key, self.num_heads)
        value_heads = split_heads(projected_value, self.num_heads)

        # 3. Attention per head; dropout on the weights only while training
        if self.training:
            dropout_p = self.dropout
        else:
            dropout_p = 0.0
        attended, weights = scaled_dot_product_attention(
            query_heads, key_heads, value_heads, mask=mask, dropout_p=dropout_p
        )  # (B, h, Lq, d_k), (B, h, Lq, Lk)

        # 4. Concatenate the heads and apply the output projection: (B, Lq, D)
        concatenated = combine_heads(attended)
        output = self.w_o(concatenated)
        return output, weights''',
        'carol': r'''class MultiHeadAttention(nn.Module):
    """Multi-head attention, Vaswani et al. (2017) section 3.2.2, batch-first.

    Args:
        d_model: model size ``D``.
        num_heads: number of heads ``h``; ``d_k = D // h``.
        dropout: dropout probability on the attention weights (training mode only).
        bias: whether the projections have biases.

    Shape:
        forward(query ``(B, Lq, D)``, key ``(B, Lk, D)``, value ``(B, Lk, D)``, mask bool
        broadcastable to ``(B, h, Lq, Lk)`` with True = attend)
        -> ``(out (B, Lq, D), weights (B, h, Lq, Lk))``.

    Raises:
        ValueError: if ``d_model % num_heads != 0``.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        # Your part of __init__: refuse a d_model that the heads cannot share equally.
        remainder = d_model % num_heads
        if remainder != 0:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by num_heads ({num_heads})"
            )

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # 1. project with all heads' weights at once
        projected_query = self.w_q(query)  # (B, Lq, D)
        projected_key = self.w_k(key)  # (B, Lk, D)
        projected_value = self.w_v(value)  # (B, Lk, D)
        # 2. split into heads
        query_heads = split_heads(projected_query, self.num_heads)  # (B, h, Lq, d_k)
        key_heads = split_heads(projected_key, self.num_heads)  # (B, h, Lk, d_k)
        value_heads = split_heads(projected_value, self.num_heads)  # (B, h, Lk, d_k)
        # 3. attention in every head; dropout only while training
        if self.training:
            dropout_probability = self.dropout
        else:
            dropout_probability = 0.0
        head_outputs, attention_weights = scaled_dot_product_attention(
            query_heads, key_heads, value_heads, mask, dropout_probability
        )
        # 4. concatenate the heads and mix them with w_o
        combined_output = combine_heads(head_outputs)  # (B, Lq, D)
        output = self.w_o(combined_output)
        return output, attention_weights''',
        'dmitri': r'''class MultiHeadAttention(nn.Module):
    """Multi-head attention, Vaswani et al. (2017) section 3.2.2, batch-first.

    Args:
        d_model: model size ``D``.
        num_heads: number of heads ``h``; ``d_k = D // h``.
        dropout: dropout probability on the attention weights (training mode only).
        bias: whether the projections have biases.

    Shape:
        forward(query ``(B, Lq, D)``, key ``(B, Lk, D)``, value ``(B, Lk, D)``, mask bool
        broadcastable to ``(B, h, Lq, Lk)`` with True = attend)
        -> ``(out (B, Lq, D), weights (B, h, Lq, Lk))``.

    Raises:
        ValueError: if ``d_model % num_heads != 0``.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        # Your part of __init__: refuse a d_model that the heads cannot share equally.
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} not divisible by num_heads={num_heads}")

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        sh = lambda w, x: split_heads(w(x), self.num_heads)
        o, a = scaled_dot_product_attention(
            sh(self.w_q, query), sh(self.w_k, key), sh(self.w_v, value), mask,
            self.dropout if self.training else 0.0,
        )
        return self.w_o(combine_heads(o)), a
''',
    },
    'make_padding_mask': {
        'alice': r'''def make_padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Mask out padded keys.

    Args:
        tokens: ``(B, L)`` integer token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, 1, L)``, True where ``tokens != pad_id`` (may be attended to).
    """
    # YOUR CODE HERE
    return (tokens != pad_id)[:, None, None, :]''',
        'bruno': r'''def make_padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Mask out padded keys.

    Args:
        tokens: ``(B, L)`` integer token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, 1, L)``, True where ``tokens != pad_id`` (may be attended to).
    """
    # YOUR CODE HERE
    # True where the token is real, False at the pads: (B, L)
    is_real_token = tokens != pad_id
    # Add axes for heads and queries so the mask broadcasts over them: (B, 1, 1, L)
    padding_mask = is_real_token.unsqueeze(1).unsqueeze(2)
    return padding_mask''',
        'carol': r'''def make_padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Mask out padded keys.

    Args:
        tokens: ``(B, L)`` integer token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, 1, L)``, True where ``tokens != pad_id`` (may be attended to).
    """
    # True for real tokens, False for padding: (B, L), same device as tokens
    is_real_token = torch.ne(tokens, pad_id)
    # add an axis for the heads and one for the queries: (B, 1, 1, L)
    with_head_axis = torch.unsqueeze(is_real_token, 1)
    padding_mask = torch.unsqueeze(with_head_axis, 2)
    return padding_mask''',
        'dmitri': r'''def make_padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Mask out padded keys.

    Args:
        tokens: ``(B, L)`` integer token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, 1, L)``, True where ``tokens != pad_id`` (may be attended to).
    """
    return (tokens != pad_id)[:, None, None, :]
''',
    },
    'make_causal_mask': {
        'alice': r'''def make_causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Let each position attend to itself and earlier positions only.

    Args:
        size: sequence length ``T``.
        device: where to create the mask (default: PyTorch's default device).

    Returns:
        bool ``(1, 1, T, T)``; ``[0, 0, i, j]`` is True iff ``j <= i``.
    """
    # YOUR CODE HERE
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]''',
        'bruno': r'''def make_causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Let each position attend to itself and earlier positions only.

    Args:
        size: sequence length ``T``.
        device: where to create the mask (default: PyTorch's default device).

    Returns:
        bool ``(1, 1, T, T)``; ``[0, 0, i, j]`` is True iff ``j <= i``.
    """
    # YOUR CODE HERE
    # Start from an all-True grid, built directly on the requested device
    all_allowed = torch.ones(size, size, dtype=torch.bool, device=device)
    # Keep the lower triangle including the diagonal: key j <= query i
    lower_triangle = torch.tril(all_allowed)
    # Leading axes for batch and heads: (1, 1, T, T)
    causal_mask = lower_triangle.view(1, 1, size, size)
    return causal_mask''',
        'carol': r'''def make_causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Let each position attend to itself and earlier positions only.

    Args:
        size: sequence length ``T``.
        device: where to create the mask (default: PyTorch's default device).

    Returns:
        bool ``(1, 1, T, T)``; ``[0, 0, i, j]`` is True iff ``j <= i``.
    """
    # a grid of True, created directly on the wanted device
    all_allowed = torch.ones(size, size, dtype=torch.bool, device=device)
    # keep the lower triangle with the diagonal: key j <= query i
    lower_triangle = torch.tril(all_allowed)
    # leading axes for batch and heads: (1, 1, T, T)
    causal_mask = torch.reshape(lower_triangle, (1, 1, size, size))
    return causal_mask''',
        'dmitri': r'''def make_causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Let each position attend to itself and earlier positions only.

    Args:
        size: sequence length ``T``.
        device: where to create the mask (default: PyTorch's default device).

    Returns:
        bool ``(1, 1, T, T)``; ``[0, 0, i, j]`` is True iff ``j <= i``.
    """
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]
''',
    },
    'make_decoder_mask': {
        'alice': r'''def make_decoder_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Padding AND causal mask for decoder self-attention.

    Args:
        tokens: ``(B, T)`` integer target token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, T, T)`` on the device of ``tokens``: True where key ``j`` is a real
        token and ``j <= i`` (query ``i``).
    """
    # YOUR CODE HERE
    return make_padding_mask(tokens, pad_id) & make_causal_mask(tokens.size(1), tokens.device)''',
        'bruno': r'''def make_decoder_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Padding AND causal mask for decoder self-attention.

    Args:
        tokens: ``(B, T)`` integer target token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, T, T)`` on the device of ``tokens``: True where key ``j`` is a real
        token and ``j <= i`` (query ``i``).
    """
    # YOUR CODE HERE
    target_len = tokens.size(1)
    padding_mask = make_padding_mask(tokens, pad_id)  # (B, 1, 1, T)
    causal_mask = make_causal_mask(target_len, device=tokens.device)  # (1, 1, T, T)
    # A key must be a real token AND not in the future; broadcasts to (B, 1, T, T)
    decoder_mask = padding_mask & causal_mask
    return decoder_mask''',
        'carol': r'''def make_decoder_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Padding AND causal mask for decoder self-attention.

    Args:
        tokens: ``(B, T)`` integer target token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, T, T)`` on the device of ``tokens``: True where key ``j`` is a real
        token and ``j <= i`` (query ``i``).
    """
    # the sequence length is axis 1 (axis 0 is the batch)
    target_length = tokens.shape[1]
    padding_mask = make_padding_mask(tokens, pad_id)  # (B, 1, 1, T)
    causal_mask = make_causal_mask(target_length, device=tokens.device)  # (1, 1, T, T)
    # a key must pass both rules; broadcasting gives (B, 1, T, T)
    decoder_mask = torch.logical_and(padding_mask, causal_mask)
    return decoder_mask''',
        'dmitri': r'''def make_decoder_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Padding AND causal mask for decoder self-attention.

    Args:
        tokens: ``(B, T)`` integer target token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, T, T)`` on the device of ``tokens``: True where key ``j`` is a real
        token and ``j <= i`` (query ``i``).
    """
    return make_padding_mask(tokens, pad_id) & make_causal_mask(tokens.size(1), tokens.device)
''',
    },
    'sinusoidal_positional_encoding': {
        'alice': r'''def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The paper's sinusoidal position table (section 3.5).

    Args:
        max_len: number of positions.
        d_model: model size ``D`` (even).

    Returns:
        float32 ``(max_len, D)`` with ``PE[p, 2i] = sin(p / 10000^(2i/D))`` and
        ``PE[p, 2i+1] = cos(p / 10000^(2i/D))``.

    Raises:
        ValueError: if ``d_model`` is odd.
    """
    # YOUR CODE HERE
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    a = torch.arange(max_len, dtype=torch.float64)[:, None] * 10000 ** (
        -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = a.sin(), a.cos()
    return pe.float()''',
        'bruno': r'''def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The paper's sinusoidal position table (section 3.5).

    Args:
        max_len: number of positions.
        d_model: model size ``D`` (even).

    Returns:
        float32 ``(max_len, D)`` with ``PE[p, 2i] = sin(p / 10000^(2i/D))`` and
        ``PE[p, 2i+1] = cos(p / 10000^(2i/D))``.

    Raises:
        ValueError: if ``d_model`` is odd.
    """
    # YOUR CODE HERE
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even to pair sines and cosines, got {d_model}")

    # Work in float64 for accuracy, return float32 at the end
    positions = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    even_indices = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i, shape (d_model/2,)
    # Frequency of pair i: 1 / 10000^(2i / d_model)
    frequencies = torch.pow(10000.0, -even_indices / d_model)  # (d_model/2,)
    angles = positions * frequencies[None, :]  # (max_len, d_model/2)

    table = torch.empty(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)  # even columns
    table[:, 1::2] = torch.cos(angles)  # odd columns
    return table.to(torch.float32)''',
        'carol': r'''def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The paper's sinusoidal position table (section 3.5).

    Args:
        max_len: number of positions.
        d_model: model size ``D`` (even).

    Returns:
        float32 ``(max_len, D)`` with ``PE[p, 2i] = sin(p / 10000^(2i/D))`` and
        ``PE[p, 2i+1] = cos(p / 10000^(2i/D))``.

    Raises:
        ValueError: if ``d_model`` is odd.
    """
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even for sin/cos pairs, got {d_model}")
    # positions as a column (max_len, 1), in float64 for accuracy
    positions = torch.arange(max_len, dtype=torch.float64)
    position_column = torch.unsqueeze(positions, 1)
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    # one sin/cos pair of columns per frequency
    number_of_pairs = d_model // 2
    for pair_index in range(number_of_pairs):
        exponent = (2 * pair_index) / d_model
        frequency = 1.0 / (10000.0 ** exponent)
        angles = position_column[:, 0] * frequency  # (max_len,)
        table[:, 2 * pair_index] = torch.sin(angles)
        table[:, 2 * pair_index + 1] = torch.cos(angles)
    # the course wants float32
    table_float32 = table.to(torch.float32)
    return table_float32''',
        'dmitri': r'''def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The paper's sinusoidal position table (section 3.5).

    Args:
        max_len: number of positions.
        d_model: model size ``D`` (even).

    Returns:
        float32 ``(max_len, D)`` with ``PE[p, 2i] = sin(p / 10000^(2i/D))`` and
        ``PE[p, 2i+1] = cos(p / 10000^(2i/D))``.

    Raises:
        ValueError: if ``d_model`` is odd.
    """
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    f64 = lambda *a: torch.arange(*a, dtype=torch.float64)
    a = torch.einsum('p,i->pi', f64(max_len), 10000.0 ** (-f64(0, d_model, 2) / d_model))
    return torch.stack((a.sin(), a.cos()), dim=-1).flatten(1).float()
''',
    },
    'PositionalEncoding': {
        'alice': r'''class PositionalEncoding(nn.Module):
    """Add sinusoidal positions, then dropout (paper sections 3.5 and 5.4).

    Args:
        d_model: model size ``D``.
        dropout: dropout probability after the addition.
        max_len: longest sequence supported.

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.

    Raises:
        ValueError: in forward, if ``L > max_len``.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
        # YOUR CODE HERE
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        if x.size(1) > self.max_len:
            raise ValueError(f"sequence length {x.size(1)} exceeds max_len={self.max_len}")
        return self.dropout(x + self.pe[: x.size(1)])''',
        'bruno': r'''class PositionalEncoding(nn.Module):
    """Add sinusoidal positions, then dropout (paper sections 3.5 and 5.4).

    Args:
        d_model: model size ``D``.
        dropout: dropout probability after the addition.
        max_len: longest sequence supported.

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.

    Raises:
        ValueError: in forward, if ``L > max_len``.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
        # YOUR CODE HERE
        table = sinusoidal_positional_encoding(max_len, d_model)  # (max_len, D)
        # A buffer: moves with .to() and .double(), but is not trained; kept out of checkpoints
        self.register_buffer("pe", table, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        batch_size, seq_len, d_model = x.shape
        if seq_len > self.max_len:
            raise ValueError(
                f"sequence length {seq_len} is longer than max_len {self.max_len} of the positional table"
            )
        # First L rows of the table, (L, D), broadcast over the batch
        positions = self.pe[:seq_len]
        summed = x + positions
        output = self.dropout(summed)
        return output''',
        'carol': r'''class PositionalEncoding(nn.Module):
    """Add sinusoidal positions, then dropout (paper sections 3.5 and 5.4).

    Args:
        d_model: model size ``D``.
        dropout: dropout probability after the addition.
        max_len: longest sequence supported.

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.

    Raises:
        ValueError: in forward, if ``L > max_len``.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
        # fixed table: a buffer moves with .to()/.double() but is not trained
        position_table = sinusoidal_positional_encoding(max_len, d_model)
        self.register_buffer("pe", position_table, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sequence_length = x.shape[1]
        if sequence_length > self.max_len:
            raise ValueError(
                f"sequence length {sequence_length} is longer than max_len {self.max_len}"
            )
        # first L rows (L, D) broadcast over the batch
        positions_to_add = self.pe[:sequence_length]
        x_with_positions = x + positions_to_add
        output = self.dropout(x_with_positions)
        return output''',
        'dmitri': r'''class PositionalEncoding(nn.Module):
    """Add sinusoidal positions, then dropout (paper sections 3.5 and 5.4).

    Args:
        d_model: model size ``D``.
        dropout: dropout probability after the addition.
        max_len: longest sequence supported.

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.

    Raises:
        ValueError: in forward, if ``L > max_len``.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.size(1)
        if t > self.max_len:
            raise ValueError(f"sequence length {t} exceeds max_len {self.max_len}")
        return self.dropout(x + self.pe[:t])
''',
    },
    'TokenEmbedding': {
        'alice': r'''class TokenEmbedding(nn.Module):
    """Token ids -> vectors times sqrt(d_model) (paper section 3.4).

    Shape:
        forward(tokens ``(B, L)`` int64) -> ``(B, L, d_model)``.
    """

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        return self.embedding(tokens) * math.sqrt(self.d_model)''',
        'bruno': r'''class TokenEmbedding(nn.Module):
    """Token ids -> vectors times sqrt(d_model) (paper section 3.4).

    Shape:
        forward(tokens ``(B, L)`` int64) -> ``(B, L, d_model)``.
    """

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        vectors = self.embedding(tokens)  # (B, L, d_model)
        scale = math.sqrt(self.d_model)
        scaled_vectors = vectors * scale
        return scaled_vectors''',
        'carol': r'''class TokenEmbedding(nn.Module):
    """Token ids -> vectors times sqrt(d_model) (paper section 3.4).

    Shape:
        forward(tokens ``(B, L)`` int64) -> ``(B, L, d_model)``.
    """

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # look up one vector per token id: (B, L, d_model)
        token_vectors = self.embedding(tokens)
        # scale by sqrt(d_model) as in the paper (a Python float keeps the dtype)
        scale_factor = math.sqrt(self.d_model)
        scaled_vectors = token_vectors * scale_factor
        return scaled_vectors''',
        'dmitri': r'''class TokenEmbedding(nn.Module):
    """Token ids -> vectors times sqrt(d_model) (paper section 3.4).

    Shape:
        forward(tokens ``(B, L)`` int64) -> ``(B, L, d_model)``.
    """

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embedding(tokens) * math.sqrt(self.d_model)
''',
    },
    'PositionwiseFeedForward': {
        'alice': r'''class PositionwiseFeedForward(nn.Module):
    """Position-wise feed-forward network, Vaswani et al. (2017) section 3.3, eq. (2).

    Args:
        d_model: input and output size ``D``.
        d_ff: inner size.
        dropout: dropout probability on the inner activations (training mode only).

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        return self.w_2(self.dropout(self.w_1(x).relu()))''',
        'bruno': r'''class PositionwiseFeedForward(nn.Module):
    """Position-wise feed-forward network, Vaswani et al. (2017) section 3.3, eq. (2).

    Args:
        d_model: input and output size ``D``.
        d_ff: inner size.
        dropout: dropout probability on the inner activations (training mode only).

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        hidden = self.w_1(x)  # (B, L, d_ff)
        hidden = F.relu(hidden)
        hidden = self.dropout(hidden)  # dropout on the hidden activations
        output = self.w_2(hidden)  # (B, L, D)
        return output''',
        'carol': r'''class PositionwiseFeedForward(nn.Module):
    """Position-wise feed-forward network, Vaswani et al. (2017) section 3.3, eq. (2).

    Args:
        d_model: input and output size ``D``.
        d_ff: inner size.
        dropout: dropout probability on the inner activations (training mode only).

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # widen every position: (B, L, D) -> (B, L, d_ff)
        hidden_pre_activation = self.w_1(x)
        hidden_activation = F.relu(hidden_pre_activation)
        # dropout on the hidden units (only active in train mode)
        hidden_after_dropout = self.dropout(hidden_activation)
        # back to the model size: (B, L, d_ff) -> (B, L, D)
        output = self.w_2(hidden_after_dropout)
        return output''',
        'dmitri': r'''class PositionwiseFeedForward(nn.Module):
    """Position-wise feed-forward network, Vaswani et al. (2017) section 3.3, eq. (2).

    Args:
        d_model: input and output size ``D``.
        d_ff: inner size.
        dropout: dropout probability on the inner activations (training mode only).

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(self.dropout(self.w_1(x).relu()))
''',
    },
    'layer_norm': {
        'alice': r'''def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Layer normalisation over the last axis, Ba et al. (2016) eq. (4); Vaswani et al. (2017) section 3.1.

    Args:
        x: ``(..., D)`` float tensor.
        weight, bias: ``(D,)``, the learned gain and bias.
        eps: added to the variance, inside the square root.

    Returns:
        ``(..., D)``, the dtype of ``x``: each vector centred, divided by its standard
        deviation (biased: divided by ``D``), times ``weight``, plus ``bias``.
    """
    # YOUR CODE HERE
    c = x - x.mean(-1, keepdim=True)
    return c / (c.square().mean(-1, keepdim=True) + eps).sqrt() * weight + bias''',
        'bruno': r'''def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Layer normalisation over the last axis, Ba et al. (2016) eq. (4); Vaswani et al. (2017) section 3.1.

    Args:
        x: ``(..., D)`` float tensor.
        weight, bias: ``(D,)``, the learned gain and bias.
        eps: added to the variance, inside the square root.

    Returns:
        ``(..., D)``, the dtype of ``x``: each vector centred, divided by its standard
        deviation (biased: divided by ``D``), times ``weight``, plus ``bias``.
    """
    # YOUR CODE HERE
    # Statistics of each vector over its own features (last axis), kept broadcastable
    mean = torch.mean(x, dim=-1, keepdim=True)  # (..., 1)
    centred = x - mean
    # Biased variance: divide by D, not D - 1
    variance = torch.mean(centred * centred, dim=-1, keepdim=True)  # (..., 1)
    # eps goes inside the square root
    standard_deviation = torch.sqrt(variance + eps)
    normalised = centred / standard_deviation
    # Learned gain and bias, one per feature
    output = normalised * weight + bias
    return output''',
        'carol': r'''def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Layer normalisation over the last axis, Ba et al. (2016) eq. (4); Vaswani et al. (2017) section 3.1.

    Args:
        x: ``(..., D)`` float tensor.
        weight, bias: ``(D,)``, the learned gain and bias.
        eps: added to the variance, inside the square root.

    Returns:
        ``(..., D)``, the dtype of ``x``: each vector centred, divided by its standard
        deviation (biased: divided by ``D``), times ``weight``, plus ``bias``.
    """
    # mean of each vector over its features, shape (..., 1)
    feature_mean = torch.mean(x, dim=-1, keepdim=True)
    centred_x = x - feature_mean
    # biased variance: the mean of the squared deviations (divides by D, not D - 1)
    squared_deviations = torch.square(centred_x)
    feature_variance = torch.mean(squared_deviations, dim=-1, keepdim=True)
    # eps goes inside the square root
    standard_deviation = torch.sqrt(feature_variance + eps)
    normalised_x = centred_x / standard_deviation
    # learned gain and bias, one per feature
    output = normalised_x * weight + bias
    return output''',
        'dmitri': r'''def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Layer normalisation over the last axis, Ba et al. (2016) eq. (4); Vaswani et al. (2017) section 3.1.

    Args:
        x: ``(..., D)`` float tensor.
        weight, bias: ``(D,)``, the learned gain and bias.
        eps: added to the variance, inside the square root.

    Returns:
        ``(..., D)``, the dtype of ``x``: each vector centred, divided by its standard
        deviation (biased: divided by ``D``), times ``weight``, plus ``bias``.
    """
    c = x - x.mean(-1, keepdim=True)
    return c * (c.square().mean(-1, keepdim=True) + eps).rsqrt() * weight + bias
''',
    },
    'EncoderLayer': {
        'alice': r'''class EncoderLayer(nn.Module):
    """One encoder layer (section 3.1): self-attention and feed-forward, each post-LN.

    Args:
        d_model, num_heads, d_ff: sizes; dropout: on each sub-layer output and inside
            attention and the feed-forward network.

    Shape:
        forward(x ``(B, S, D)``, src_mask bool broadcastable to ``(B, h, S, S)``,
        True = attend) -> ``(B, S, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        # YOUR CODE HERE
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask)[0]))
        return self.norm2(x + self.dropout(self.feed_forward(x)))''',
        'bruno': r'''class EncoderLayer(nn.Module):
    """One encoder layer (section 3.1): self-attention and feed-forward, each post-LN.

    Args:
        d_model, num_heads, d_ff: sizes; dropout: on each sub-layer output and inside
            attention and the feed-forward network.

    Shape:
        forward(x ``(B, S, D)``, src_mask bool broadcastable to ``(B, h, S, S)``,
        True = attend) -> ``(B, S, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        # YOUR CODE HERE
        # Sub-layer 1: self-attention, then add & norm (post-LN)
        attention_output, _ = self.self_attn(x, x, x, src_mask)
        x = self.norm1(x + self.dropout(attention_output))
        # Sub-layer 2: feed-forward, then add & norm
        feed_forward_output = self.feed_forward(x)
        x = self.norm2(x + self.dropout(feed_forward_output))
        return x''',
        'carol': r'''class EncoderLayer(nn.Module):
    """One encoder layer (section 3.1): self-attention and feed-forward, each post-LN.

    Args:
        d_model, num_heads, d_ff: sizes; dropout: on each sub-layer output and inside
            attention and the feed-forward network.

    Shape:
        forward(x ``(B, S, D)``, src_mask bool broadcastable to ``(B, h, S, S)``,
        True = attend) -> ``(B, S, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        # sub-layer 1: self-attention (keep the output, drop the weights), add & norm
        attention_output, _ = self.self_attn(x, x, x, src_mask)
        attention_output = self.dropout(attention_output)
        x = self.norm1(x + attention_output)
        # sub-layer 2: feed-forward, add & norm
        feed_forward_output = self.feed_forward(x)
        feed_forward_output = self.dropout(feed_forward_output)
        x = self.norm2(x + feed_forward_output)
        return x''',
        'dmitri': r'''class EncoderLayer(nn.Module):
    """One encoder layer (section 3.1): self-attention and feed-forward, each post-LN.

    Args:
        d_model, num_heads, d_ff: sizes; dropout: on each sub-layer output and inside
            attention and the feed-forward network.

    Shape:
        forward(x ``(B, S, D)``, src_mask bool broadcastable to ``(B, h, S, S)``,
        True = attend) -> ``(B, S, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        an = lambda n, x, y: n(x + self.dropout(y))
        x = an(self.norm1, x, self.self_attn(x, x, x, src_mask)[0])
        return an(self.norm2, x, self.feed_forward(x))
''',
    },
    'DecoderLayer': {
        'alice': r'''class DecoderLayer(nn.Module):
    """One decoder layer (section 3.1): masked self-attention, cross-attention, feed-forward.

    Shape:
        forward(x ``(B, T, D)``, memory ``(B, S, D)``, src_mask broadcastable to
        ``(B, h, T, S)``, tgt_mask broadcastable to ``(B, h, T, T)``) -> ``(B, T, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        # YOUR CODE HERE
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)[0]))
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, src_mask)[0]))
        return self.norm3(x + self.dropout(self.feed_forward(x)))''',
        'bruno': r'''class DecoderLayer(nn.Module):
    """One decoder layer (section 3.1): masked self-attention, cross-attention, feed-forward.

    Shape:
        forward(x ``(B, T, D)``, memory ``(B, S, D)``, src_mask broadcastable to
        ``(B, h, T, S)``, tgt_mask broadcastable to ``(B, h, T, T)``) -> ``(B, T, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        # YOUR CODE HERE
        # Sub-layer 1: masked self-attention over the target (padding AND causal mask)
        self_attention_output, _ = self.self_attn(x, x, x, tgt_mask)
        x = self.norm1(x + self.dropout(self_attention_output))
        # Sub-layer 2: cross-attention, queries from the decoder, keys and values from memory
        cross_attention_output, _ = self.cross_attn(x, memory, memory, src_mask)
        x = self.norm2(x + self.dropout(cross_attention_output))
        # Sub-layer 3: feed-forward
        feed_forward_output = self.feed_forward(x)
        x = self.norm3(x + self.dropout(feed_forward_output))
        return x''',
        'carol': r'''class DecoderLayer(nn.Module):
    """One decoder layer (section 3.1): masked self-attention, cross-attention, feed-forward.

    Shape:
        forward(x ``(B, T, D)``, memory ``(B, S, D)``, src_mask broadcastable to
        ``(B, h, T, S)``, tgt_mask broadcastable to ``(B, h, T, T)``) -> ``(B, T, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        # sub-layer 1: masked self-attention over the target (padding and causal mask)
        self_attention_output, _ = self.self_attn(x, x, x, tgt_mask)
        self_attention_output = self.dropout(self_attention_output)
        x = self.norm1(x + self_attention_output)
        # sub-layer 2: cross-attention, queries from the decoder, keys and values from memory
        cross_attention_output, _ = self.cross_attn(x, memory, memory, src_mask)
        cross_attention_output = self.dropout(cross_attention_output)
        x = self.norm2(x + cross_attention_output)
        # sub-layer 3: feed-forward
        feed_forward_output = self.feed_forward(x)
        feed_forward_output = self.dropout(feed_forward_output)
        x = self.norm3(x + feed_forward_output)
        return x''',
        'dmitri': r'''class DecoderLayer(nn.Module):
    """One decoder layer (section 3.1): masked self-attention, cross-attention, feed-forward.

    Shape:
        forward(x ``(B, T, D)``, memory ``(B, S, D)``, src_mask broadcastable to
        ``(B, h, T, S)``, tgt_mask broadcastable to ``(B, h, T, T)``) -> ``(B, T, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        an = lambda n, x, y: n(x + self.dropout(y))
        x = an(self.norm1, x, self.self_attn(x, x, x, tgt_mask)[0])
        x = an(self.norm2, x, self.cross_attn(x, memory, memory, src_mask)[0])
        return an(self.norm3, x, self.feed_forward(x))
''',
    },
    'Encoder': {
        'alice': r'''class Encoder(nn.Module):
    """``num_layers`` independent ``EncoderLayer``s in sequence (section 3.1).

    Shape:
        forward(x ``(B, S, D)`` embedded, src_mask) -> ``(B, S, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        # YOUR CODE HERE
        for l in self.layers:
            x = l(x, src_mask)
        return x''',
        'bruno': r'''class Encoder(nn.Module):
    """``num_layers`` independent ``EncoderLayer``s in sequence (section 3.1).

    Shape:
        forward(x ``(B, S, D)`` embedded, src_mask) -> ``(B, S, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        # YOUR CODE HERE
        hidden = x
        for layer in self.layers:
            hidden = layer(hidden, src_mask)
        return hidden''',
        'carol': r'''class Encoder(nn.Module):
    """``num_layers`` independent ``EncoderLayer``s in sequence (section 3.1).

    Shape:
        forward(x ``(B, S, D)`` embedded, src_mask) -> ``(B, S, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        # each layer refines the previous layer's output; the mask stays the same
        hidden_states = x
        for encoder_layer in self.layers:
            hidden_states = encoder_layer(hidden_states, src_mask)
        return hidden_states''',
        'dmitri': r'''class Encoder(nn.Module):
    """``num_layers`` independent ``EncoderLayer``s in sequence (section 3.1).

    Shape:
        forward(x ``(B, S, D)`` embedded, src_mask) -> ``(B, S, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        for l in self.layers:
            x = l(x, src_mask)
        return x
''',
    },
    'Decoder': {
        'alice': r'''class Decoder(nn.Module):
    """``num_layers`` independent ``DecoderLayer``s in sequence, all attending to ``memory``.

    Shape:
        forward(x ``(B, T, D)`` embedded, memory ``(B, S, D)``, src_mask, tgt_mask) -> ``(B, T, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        # YOUR CODE HERE
        for l in self.layers:
            x = l(x, memory, src_mask, tgt_mask)
        return x''',
        'bruno': r'''class Decoder(nn.Module):
    """``num_layers`` independent ``DecoderLayer``s in sequence, all attending to ``memory``.

    Shape:
        forward(x ``(B, T, D)`` embedded, memory ``(B, S, D)``, src_mask, tgt_mask) -> ``(B, T, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        # YOUR CODE HERE
        hidden = x
        for layer in self.layers:
            # memory and the masks are the same for every layer
            hidden = layer(hidden, memory, src_mask, tgt_mask)
        return hidden''',
        'carol': r'''class Decoder(nn.Module):
    """``num_layers`` independent ``DecoderLayer``s in sequence, all attending to ``memory``.

    Shape:
        forward(x ``(B, T, D)`` embedded, memory ``(B, S, D)``, src_mask, tgt_mask) -> ``(B, T, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        # x changes from layer to layer; memory and both masks are the same for all layers
        hidden_states = x
        for decoder_layer in self.layers:
            hidden_states = decoder_layer(hidden_states, memory, src_mask, tgt_mask)
        return hidden_states''',
        'dmitri': r'''class Decoder(nn.Module):
    """``num_layers`` independent ``DecoderLayer``s in sequence, all attending to ``memory``.

    Shape:
        forward(x ``(B, T, D)`` embedded, memory ``(B, S, D)``, src_mask, tgt_mask) -> ``(B, T, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        for l in self.layers:
            x = l(x, memory, src_mask, tgt_mask)
        return x
''',
    },
    'Transformer': {
        'alice': r'''class Transformer(nn.Module):
    """The encoder-decoder Transformer, Vaswani et al. (2017) figure 1, batch-first.

    Args:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        d_model, num_heads, num_layers, d_ff, dropout: the paper's D, h, N, d_ff, P_drop.
        max_len: the longest sequence the positional encoding covers.
        pad_id: the padding id of both sides; ``forward`` masks it.
        tie_embeddings: share one matrix between ``tgt_embed`` and ``generator`` (paper
            section 3.4); default False, each owns its weights.

    Shape:
        encode(src ``(B, S)`` int64, src_mask) -> memory ``(B, S, D)``;
        decode(tgt ``(B, T)`` int64, memory, src_mask, tgt_mask) -> ``(B, T, D)``;
        forward(src ``(B, S)``, tgt ``(B, T)``) -> logits ``(B, T, tgt_vocab_size)``.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        pad_id: int = 0,
        tie_embeddings: bool = False,
    ):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = TokenEmbedding(src_vocab_size, d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model)
        self.positional_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        if tie_embeddings:  # paper section 3.4: the generator reuses the target embedding matrix (V, D)
            self.generator.weight = self.tgt_embed.embedding.weight
        for param in self.parameters():
            if param.dim() > 1:
                nn.init.xavier_uniform_(param)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        # YOUR CODE HERE
        return self.encoder(self.positional_encoding(self.src_embed(src)), src_mask)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        # YOUR CODE HERE
        return self.decoder(self.positional_encoding(self.tgt_embed(tgt)), memory, src_mask, tgt_mask)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        m = make_padding_mask(src, self.pad_id)
        return self.generator(self.decode(tgt, self.encode(src, m), m, make_decoder_mask(tgt, self.pad_id)))''',
        'bruno': r'''class Transformer(nn.Module):
    """The encoder-decoder Transformer, Vaswani et al. (2017) figure 1, batch-first.

    Args:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        d_model, num_heads, num_layers, d_ff, dropout: the paper's D, h, N, d_ff, P_drop.
        max_len: the longest sequence the positional encoding covers.
        pad_id: the padding id of both sides; ``forward`` masks it.
        tie_embeddings: share one matrix between ``tgt_embed`` and ``generator`` (paper
            section 3.4); default False, each owns its weights.

    Shape:
        encode(src ``(B, S)`` int64, src_mask) -> memory ``(B, S, D)``;
        decode(tgt ``(B, T)`` int64, memory, src_mask, tgt_mask) -> ``(B, T, D)``;
        forward(src ``(B, S)``, tgt ``(B, T)``) -> logits ``(B, T, tgt_vocab_size)``.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        pad_id: int = 0,
        tie_embeddings: bool = False,
    ):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = TokenEmbedding(src_vocab_size, d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model)
        self.positional_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        if tie_embeddings:  # paper section 3.4: the generator reuses the target embedding matrix (V, D)
            self.generator.weight = self.tgt_embed.embedding.weight
        for param in self.parameters():
            if param.dim() > 1:
                nn.init.xavier_uniform_(param)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        # YOUR CODE HERE
        source_vectors = self.src_embed(src)  # (B, S, D), scaled by sqrt(D)
        source_vectors = self.positional_encoding(source_vectors)  # add positions, then dropout
        memory = self.encoder(source_vectors, src_mask)  # (B, S, D)
        return memory

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        # YOUR CODE HERE
        target_vectors = self.tgt_embed(tgt)  # (B, T, D)
        target_vectors = self.positional_encoding(target_vectors)
        decoded = self.decoder(target_vectors, memory, src_mask, tgt_mask)  # (B, T, D)
        return decoded

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        # Masks from the padding id: source padding (B, 1, 1, S), target padding AND causal (B, 1, T, T)
        src_mask = make_padding_mask(src, self.pad_id)
        tgt_mask = make_decoder_mask(tgt, self.pad_id)
        memory = self.encode(src, src_mask)
        decoded = self.decode(tgt, memory, src_mask, tgt_mask)
        # Raw logits over the target vocabulary, no softmax
        logits = self.generator(decoded)  # (B, T, tgt_vocab_size)
        return logits''',
        'carol': r'''class Transformer(nn.Module):
    """The encoder-decoder Transformer, Vaswani et al. (2017) figure 1, batch-first.

    Args:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        d_model, num_heads, num_layers, d_ff, dropout: the paper's D, h, N, d_ff, P_drop.
        max_len: the longest sequence the positional encoding covers.
        pad_id: the padding id of both sides; ``forward`` masks it.
        tie_embeddings: share one matrix between ``tgt_embed`` and ``generator`` (paper
            section 3.4); default False, each owns its weights.

    Shape:
        encode(src ``(B, S)`` int64, src_mask) -> memory ``(B, S, D)``;
        decode(tgt ``(B, T)`` int64, memory, src_mask, tgt_mask) -> ``(B, T, D)``;
        forward(src ``(B, S)``, tgt ``(B, T)``) -> logits ``(B, T, tgt_vocab_size)``.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        pad_id: int = 0,
        tie_embeddings: bool = False,
    ):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = TokenEmbedding(src_vocab_size, d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model)
        self.positional_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        if tie_embeddings:  # paper section 3.4: the generator reuses the target embedding matrix (V, D)
            self.generator.weight = self.tgt_embed.embedding.weight
        for param in self.parameters():
            if param.dim() > 1:
                nn.init.xavier_uniform_(param)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        # token vectors (times sqrt(D)), then positions and dropout
        source_embeddings = self.src_embed(src)  # (B, S, D)
        source_with_positions = self.positional_encoding(source_embeddings)
        # the encoder stack gives the memory
        memory = self.encoder(source_with_positions, src_mask)  # (B, S, D)
        return memory

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        # same embedding steps on the target side
        target_embeddings = self.tgt_embed(tgt)  # (B, T, D)
        target_with_positions = self.positional_encoding(target_embeddings)
        decoder_output = self.decoder(target_with_positions, memory, src_mask, tgt_mask)  # (B, T, D)
        return decoder_output

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        # masks from the padding id: source padding (B, 1, 1, S), decoder padding & causal (B, 1, T, T)
        source_mask = make_padding_mask(src, self.pad_id)
        target_mask = make_decoder_mask(tgt, self.pad_id)
        memory = self.encode(src, source_mask)
        decoder_output = self.decode(tgt, memory, source_mask, target_mask)
        # raw logits over the target vocabulary (the loss applies the softmax)
        logits = self.generator(decoder_output)  # (B, T, tgt_vocab_size)
        return logits''',
        'dmitri': r'''class Transformer(nn.Module):
    """The encoder-decoder Transformer, Vaswani et al. (2017) figure 1, batch-first.

    Args:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        d_model, num_heads, num_layers, d_ff, dropout: the paper's D, h, N, d_ff, P_drop.
        max_len: the longest sequence the positional encoding covers.
        pad_id: the padding id of both sides; ``forward`` masks it.
        tie_embeddings: share one matrix between ``tgt_embed`` and ``generator`` (paper
            section 3.4); default False, each owns its weights.

    Shape:
        encode(src ``(B, S)`` int64, src_mask) -> memory ``(B, S, D)``;
        decode(tgt ``(B, T)`` int64, memory, src_mask, tgt_mask) -> ``(B, T, D)``;
        forward(src ``(B, S)``, tgt ``(B, T)``) -> logits ``(B, T, tgt_vocab_size)``.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        pad_id: int = 0,
        tie_embeddings: bool = False,
    ):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = TokenEmbedding(src_vocab_size, d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model)
        self.positional_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        if tie_embeddings:  # paper section 3.4: the generator reuses the target embedding matrix (V, D)
            self.generator.weight = self.tgt_embed.embedding.weight
        for param in self.parameters():
            if param.dim() > 1:
                nn.init.xavier_uniform_(param)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        return self.encoder(self.positional_encoding(self.src_embed(src)), src_mask)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        return self.decoder(self.positional_encoding(self.tgt_embed(tgt)), memory, src_mask, tgt_mask)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        sm, tm = make_padding_mask(src, self.pad_id), make_decoder_mask(tgt, self.pad_id)
        return self.generator(self.decode(tgt, self.encode(src, sm), sm, tm))
''',
    },
}
