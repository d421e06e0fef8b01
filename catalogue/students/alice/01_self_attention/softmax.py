# student: alice
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
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)
