# student: alice
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
    w = softmax(attention_scores(x @ w_q, x @ w_k), dim=-1)
    return w @ (x @ w_v)
