# student: carol
# source: written independently from the student release and `check` alone (catalogue/README.md)

def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut each position's vector into ``num_heads`` slices, heads first.

    Args:
        x: ``(B, L, D)`` with ``D`` divisible by ``num_heads``.
        num_heads: ``h``.

    Returns:
        ``(B, h, L, d_k)`` with ``d_k = D // h``; ``out[b, i, p] = x[b, p, i*d_k:(i+1)*d_k]``.
    """
    batch_size, sequence_length, d_model = x.shape
    head_size = d_model // num_heads
    # first cut each position's vector into h slices: (B, L, h, d_k)
    x_per_position_heads = torch.reshape(x, (batch_size, sequence_length, num_heads, head_size))
    # then move the head axis in front of the positions: (B, h, L, d_k)
    heads_first = torch.transpose(x_per_position_heads, 1, 2)
    return heads_first
