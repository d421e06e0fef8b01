# student: dmitri
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
    s = torch.einsum('...qd,...kd->...qk', query, key) / math.sqrt(query.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
    a = s.softmax(dim=-1)
    if mask is not None:
        a = a.masked_fill(~mask, 0.0)
    if dropout_p > 0:
        a = F.dropout(a, p=dropout_p)
    return torch.einsum('...qk,...kd->...qd', a, value), a
