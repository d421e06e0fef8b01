# student: carol
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
    # the sequence length is axis 1 (axis 0 is the batch)
    target_length = tokens.shape[1]
    padding_mask = make_padding_mask(tokens, pad_id)  # (B, 1, 1, T)
    causal_mask = make_causal_mask(target_length, device=tokens.device)  # (1, 1, T, T)
    # a key must pass both rules; broadcasting gives (B, 1, T, T)
    decoder_mask = torch.logical_and(padding_mask, causal_mask)
    return decoder_mask
