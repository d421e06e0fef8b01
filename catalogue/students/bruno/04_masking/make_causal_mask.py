# student: bruno
# source: written independently from the student release and `check` alone (catalogue/README.md)

def make_causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Let each position attend to itself and earlier positions only.

    Args:
        size: sequence length ``T``.
        device: where to create the mask (default: PyTorch's default device).

    Returns:
        bool ``(1, 1, T, T)``; ``[0, 0, i, j]`` is True iff ``j <= i``.
    """
    # YOUR CODE HERE
    # Start from an all-True grid, built directly on the requested device
    all_allowed = torch.ones(size, size, dtype=torch.bool, device=device)
    # Keep the lower triangle including the diagonal: key j <= query i
    lower_triangle = torch.tril(all_allowed)
    # Leading axes for batch and heads: (1, 1, T, T)
    causal_mask = lower_triangle.view(1, 1, size, size)
    return causal_mask
