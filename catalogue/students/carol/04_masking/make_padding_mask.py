# student: carol
# source: written independently from the student release and `check` alone (catalogue/README.md)

def make_padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Mask out padded keys.

    Args:
        tokens: ``(B, L)`` integer token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, 1, L)``, True where ``tokens != pad_id`` (may be attended to).
    """
    # True for real tokens, False for padding: (B, L), same device as tokens
    is_real_token = torch.ne(tokens, pad_id)
    # add an axis for the heads and one for the queries: (B, 1, 1, L)
    with_head_axis = torch.unsqueeze(is_real_token, 1)
    padding_mask = torch.unsqueeze(with_head_axis, 2)
    return padding_mask
