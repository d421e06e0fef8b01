"""Reference for notebook 02: scaled dot-product attention with a boolean mask.

Source: Vaswani et al. (2017), section 3.2.1, equation (1):
``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention (paper eq. 1), returning the weights too.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.
        value: ``(..., Lk, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., Lq, Lk)``;
            ``True`` = may attend, ``False`` = blocked (the convention of
            ``F.scaled_dot_product_attention``).
        dropout_p: dropout probability applied to the weights whenever > 0
            (the caller passes 0.0 in evaluation, as with the PyTorch built-in).

    Returns:
        ``(output (..., Lq, d_v), weights (..., Lq, Lk))``. Blocked positions get
        weight exactly 0; a fully blocked row gets zero weights and a zero output.

    Raises:
        TypeError: if ``mask`` is not a bool tensor.
    """
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True = attend), got dtype {mask.dtype}")
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (..., Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # A fully blocked row is all -inf, so softmax gives NaN there; zero it (and
        # re-zero blocked entries) so such rows contribute nothing.
        weights = weights.masked_fill(~mask, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ value, weights  # (..., Lq, d_v), (..., Lq, Lk)
