# student: bruno
# source: written independently from the student release and `check` alone (catalogue/README.md)

def make_padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Mask out padded keys.

    Args:
        tokens: ``(B, L)`` integer token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, 1, L)``, True where ``tokens != pad_id`` (may be attended to).
    """
    # YOUR CODE HERE
    # True where the token is real, False at the pads: (B, L)
    is_real_token = tokens != pad_id
    # Add axes for heads and queries so the mask broadcasts over them: (B, 1, 1, L)
    padding_mask = is_real_token.unsqueeze(1).unsqueeze(2)
    return padding_mask
