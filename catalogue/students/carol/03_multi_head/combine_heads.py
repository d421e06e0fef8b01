# student: carol
# source: written independently from the student release and `check` alone (catalogue/README.md)

def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads of each position (inverse of ``split_heads``).

    Args:
        x: ``(B, h, L, d_k)``.

    Returns:
        ``(B, L, h * d_k)``.
    """
    batch_size, num_heads, sequence_length, head_size = x.shape
    # put the positions back in front of the heads: (B, L, h, d_k)
    positions_first = torch.transpose(x, 1, 2)
    # glue the heads of each position together; reshape copies when the memory is not contiguous
    combined = torch.reshape(positions_first, (batch_size, sequence_length, num_heads * head_size))
    return combined
