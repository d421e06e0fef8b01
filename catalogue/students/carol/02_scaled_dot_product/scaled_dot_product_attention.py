# student: carol
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
    return output, attention_weights
