# student: alice
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
    return (tokens != pad_id)[:, None, None, :]
