# student: alice
# source: written independently from the student release and `check` alone (catalogue/README.md)

def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
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
    return pe.float()
