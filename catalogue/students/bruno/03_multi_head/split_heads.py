# student: bruno
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
    batch_size, seq_len, d_model = x.shape
    d_k = d_model // num_heads
    # Cut each position's vector into num_heads slices: (B, L, h, d_k)
    x_sliced = x.view(batch_size, seq_len, num_heads, d_k)
    # Move the head axis in front of the positions: (B, h, L, d_k)
    heads = torch.transpose(x_sliced, 1, 2)
    return heads
