# student: carol
# source: written independently from the student release and `check` alone (catalogue/README.md)

def self_attention(
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
    return output
