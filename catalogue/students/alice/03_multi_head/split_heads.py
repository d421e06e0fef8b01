# student: alice
# source: written independently from the student release and `check` alone (catalogue/README.md)

def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut each position's vector into ``num_heads`` slices, heads first.

    Args:
        x: ``(B, L, D)`` with ``D`` divisible by ``num_heads``.
        num_heads: ``h``.

    Returns:
        ``(B, h, L, d_k)`` with ``d_k = D // h``; ``out[b, i, p] = x[b, p, i*d_k:(i+1)*d_k]``.
    """
    # YOUR CODE HERE
    B, L, D = x.shape
    return x.view(B, L, num_heads, D // num_heads).transpose(1, 2)
