# student: carol
# source: written independently from the student release and `check` alone (catalogue/README.md)

def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of ``x`` along ``dim``, written by hand.

    Args:
        x: floating tensor of any shape.
        dim: the axis whose entries become probabilities.

    Returns:
        A tensor of the same shape and dtype; entries along ``dim`` are >= 0 and sum to 1.
    """
    # largest entry along dim, kept as a size-1 axis so it broadcasts back
    max_along_dim = torch.amax(x, dim=dim, keepdim=True)
    # shift so every exponent is <= 0 (no overflow)
    shifted_x = x - max_along_dim
    exponentials = torch.exp(shifted_x)
    # normalise so the entries along dim sum to one
    sum_of_exponentials = torch.sum(exponentials, dim=dim, keepdim=True)
    probabilities = exponentials / sum_of_exponentials
    return probabilities
