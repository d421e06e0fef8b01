# student: bruno
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
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even to pair sines and cosines, got {d_model}")

    # Work in float64 for accuracy, return float32 at the end
    positions = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    even_indices = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i, shape (d_model/2,)
    # Frequency of pair i: 1 / 10000^(2i / d_model)
    frequencies = torch.pow(10000.0, -even_indices / d_model)  # (d_model/2,)
    angles = positions * frequencies[None, :]  # (max_len, d_model/2)

    table = torch.empty(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)  # even columns
    table[:, 1::2] = torch.cos(angles)  # odd columns
    return table.to(torch.float32)
