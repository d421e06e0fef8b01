# student: bruno
# source: written independently from the student release and `check` alone (catalogue/README.md)

def scaled_dot_product_attention(
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
    return output, weights
