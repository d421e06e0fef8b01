# student: dmitri
# source: written independently from the student release and `check` alone (catalogue/README.md)

def make_causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Let each position attend to itself and earlier positions only.

    Args:
        size: sequence length ``T``.
        device: where to create the mask (default: PyTorch's default device).

    Returns:
        bool ``(1, 1, T, T)``; ``[0, 0, i, j]`` is True iff ``j <= i``.
    """
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]
