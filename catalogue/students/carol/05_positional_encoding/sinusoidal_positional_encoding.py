# student: carol
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
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even for sin/cos pairs, got {d_model}")
    # positions as a column (max_len, 1), in float64 for accuracy
    positions = torch.arange(max_len, dtype=torch.float64)
    position_column = torch.unsqueeze(positions, 1)
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    # one sin/cos pair of columns per frequency
    number_of_pairs = d_model // 2
    for pair_index in range(number_of_pairs):
        exponent = (2 * pair_index) / d_model
        frequency = 1.0 / (10000.0 ** exponent)
        angles = position_column[:, 0] * frequency  # (max_len,)
        table[:, 2 * pair_index] = torch.sin(angles)
        table[:, 2 * pair_index + 1] = torch.cos(angles)
    # the course wants float32
    table_float32 = table.to(torch.float32)
    return table_float32
