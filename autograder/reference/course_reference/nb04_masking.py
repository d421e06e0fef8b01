"""Reference for notebook 04: padding and causal masks (bool, True = may attend).

Source: Vaswani et al. (2017), section 3.2.3 (masking illegal connections in the decoder)
and the padding convention of ``F.scaled_dot_product_attention``.
"""

from __future__ import annotations

import torch


def make_padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """``True`` where a key is a real token: ``(B, L)`` ints -> bool ``(B, 1, 1, L)``.

    Broadcasts against scores ``(B, h, Lq, L)``: every head and query ignores padded keys.
    """
    return (tokens != pad_id)[:, None, None, :]


def make_causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Lower triangle incl. the diagonal: position ``t`` may attend to ``0..t``.

    Returns:
        bool ``(1, 1, size, size)`` on ``device``.
    """
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]


def make_decoder_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Decoder self-attention mask: padding AND causal, bool ``(B, 1, T, T)``."""
    return make_padding_mask(tokens, pad_id) & make_causal_mask(tokens.size(1), tokens.device)
