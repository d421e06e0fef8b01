# student: dmitri
# source: written independently from the student release and `check` alone (catalogue/README.md)

def attention_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Dot product of every query with every key.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.

    Returns:
        ``(..., Lq, Lk)`` with entry ``[i, j] = query[i] . key[j]``.
    """
    return torch.einsum('...qd,...kd->...qk', query, key)
