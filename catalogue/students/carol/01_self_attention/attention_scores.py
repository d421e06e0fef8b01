# student: carol
# source: written independently from the student release and `check` alone (catalogue/README.md)

def attention_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
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
    return scores
