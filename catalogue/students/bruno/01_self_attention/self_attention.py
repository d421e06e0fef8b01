# student: bruno
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
    return output
