# student: alice
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
    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = s.softmax(-1)
    if mask is not None:
        w = w.masked_fill(~mask, 0.0)
    if dropout_p > 0:
        w = F.dropout(w, dropout_p)
    return w @ value, w
