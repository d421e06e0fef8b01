# student: dmitri
# source: written independently from the student release and `check` alone (catalogue/README.md)

def make_decoder_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Padding AND causal mask for decoder self-attention.

    Args:
        tokens: ``(B, T)`` integer target token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, T, T)`` on the device of ``tokens``: True where key ``j`` is a real
        token and ``j <= i`` (query ``i``).
    """
    return make_padding_mask(tokens, pad_id) & make_causal_mask(tokens.size(1), tokens.device)
