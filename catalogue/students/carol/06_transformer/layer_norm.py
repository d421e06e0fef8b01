# student: carol
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
    # mean of each vector over its features, shape (..., 1)
    feature_mean = torch.mean(x, dim=-1, keepdim=True)
    centred_x = x - feature_mean
    # biased variance: the mean of the squared deviations (divides by D, not D - 1)
    squared_deviations = torch.square(centred_x)
    feature_variance = torch.mean(squared_deviations, dim=-1, keepdim=True)
    # eps goes inside the square root
    standard_deviation = torch.sqrt(feature_variance + eps)
    normalised_x = centred_x / standard_deviation
    # learned gain and bias, one per feature
    output = normalised_x * weight + bias
    return output
