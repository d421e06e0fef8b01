# student: dmitri
# source: written independently from the student release and `check` alone (catalogue/README.md)

def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads of each position (inverse of ``split_heads``).

    Args:
        x: ``(B, h, L, d_k)``.

    Returns:
        ``(B, L, h * d_k)``.
    """
    return x.transpose(1, 2).flatten(2)
