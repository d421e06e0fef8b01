# student: bruno
# source: written independently from the student release and `check` alone (catalogue/README.md)

def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads of each position (inverse of ``split_heads``).

    Args:
        x: ``(B, h, L, d_k)``.

    Returns:
        ``(B, L, h * d_k)``.
    """
    # YOUR CODE HERE
    batch_size, num_heads, seq_len, d_k = x.shape
    # Back to (B, L, h, d_k)
    x_positions_first = torch.transpose(x, 1, 2)
    # The transpose is non-contiguous, so reshape (copies when needed): (B, L, h * d_k)
    merged = x_positions_first.reshape(batch_size, seq_len, num_heads * d_k)
    return merged
