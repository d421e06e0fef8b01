# student: bruno
# source: written independently from the student release and `check` alone (catalogue/README.md)

def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of ``x`` along ``dim``, written by hand.

    Args:
        x: floating tensor of any shape.
        dim: the axis whose entries become probabilities.

    Returns:
        A tensor of the same shape and dtype; entries along ``dim`` are >= 0 and sum to 1.
    """
    # YOUR CODE HERE
    # Largest entry along dim; keepdim so it broadcasts back against x
    max_values = x.amax(dim=dim, keepdim=True)
    # Shift so every exponent is <= 0 (no overflow)
    shifted = x - max_values
    exponentials = torch.exp(shifted)
    totals = torch.sum(exponentials, dim=dim, keepdim=True)
    probabilities = exponentials / totals
    return probabilities
