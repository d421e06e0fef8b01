# student: dmitri
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
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    f64 = lambda *a: torch.arange(*a, dtype=torch.float64)
    a = torch.einsum('p,i->pi', f64(max_len), 10000.0 ** (-f64(0, d_model, 2) / d_model))
    return torch.stack((a.sin(), a.cos()), dim=-1).flatten(1).float()
