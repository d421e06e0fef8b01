# student: alice
# source: written independently from the student release and `check` alone (catalogue/README.md)

def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Layer normalisation over the last axis, Ba et al. (2016) eq. (4); Vaswani et al. (2017) section 3.1.

    Args:
        x: ``(..., D)`` float tensor.
        weight, bias: ``(D,)``, the learned gain and bias.
        eps: added to the variance, inside the square root.

    Returns:
        ``(..., D)``, the dtype of ``x``: each vector centred, divided by its standard
        deviation (biased: divided by ``D``), times ``weight``, plus ``bias``.
    """
    # YOUR CODE HERE
    c = x - x.mean(-1, keepdim=True)
    return c / (c.square().mean(-1, keepdim=True) + eps).sqrt() * weight + bias
