# student: bruno
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
    # Statistics of each vector over its own features (last axis), kept broadcastable
    mean = torch.mean(x, dim=-1, keepdim=True)  # (..., 1)
    centred = x - mean
    # Biased variance: divide by D, not D - 1
    variance = torch.mean(centred * centred, dim=-1, keepdim=True)  # (..., 1)
    # eps goes inside the square root
    standard_deviation = torch.sqrt(variance + eps)
    normalised = centred / standard_deviation
    # Learned gain and bias, one per feature
    output = normalised * weight + bias
    return output
