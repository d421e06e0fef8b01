"""Reference for notebook 01: plain dot-product self-attention, ``softmax(Q K^T) V``.

No ``1/sqrt(d_k)`` scale here on purpose: notebook 02 introduces it.
Source: Vaswani et al. (2017), "Attention Is All You Need", section 3.2.
"""

from __future__ import annotations

import torch
from torch import nn


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along ``dim``.

    Subtracting the maximum along ``dim`` leaves the result unchanged
    (``exp(a - m) / sum exp(b - m) = exp(a) / sum exp(b)``) and keeps ``exp`` from
    overflowing to ``inf`` on large inputs.

    Args:
        x: floating tensor of any shape.
        dim: the axis whose entries are turned into probabilities.

    Returns:
        Tensor of the shape and dtype of ``x``; entries along ``dim`` are >= 0 and sum to 1.
    """
    shifted = x - x.amax(dim=dim, keepdim=True)
    exp = shifted.exp()
    return exp / exp.sum(dim=dim, keepdim=True)


def attention_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Raw dot products of every query with every key.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.

    Returns:
        ``(..., Lq, Lk)``, entry ``[i, j] = query[i] . key[j]`` (no scaling).
    """
    return query @ key.transpose(-2, -1)  # (..., Lq, Lk)


def self_attention(
    x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor
) -> torch.Tensor:
    """Self-attention with given projection matrices: ``softmax(Q K^T) V``.

    Args:
        x: ``(B, L, D)`` token vectors.
        w_q, w_k: ``(D, d_k)`` query and key projections.
        w_v: ``(D, d_v)`` value projection.

    Returns:
        ``(B, L, d_v)``: each position's weighted average of the values.
    """
    query, key, value = x @ w_q, x @ w_k, x @ w_v  # (B, L, d_k), (B, L, d_k), (B, L, d_v)
    weights = softmax(attention_scores(query, key), dim=-1)  # (B, L, L)
    return weights @ value  # (B, L, d_v)


class SelfAttention(nn.Module):
    """Single-head self-attention with learned projections (no bias, no scale).

    Args:
        d_model: size ``D`` of the input vectors.
        d_k: size of queries and keys (default ``d_model``).
        d_v: size of values and of the output (default ``d_model``).

    Attributes:
        w_q, w_k: ``nn.Linear(d_model, d_k, bias=False)``.
        w_v: ``nn.Linear(d_model, d_v, bias=False)``.

    Shape:
        forward(x): x ``(B, L, D)`` -> ``(out (B, L, d_v), weights (B, L, L))``.
    """

    def __init__(self, d_model: int, d_k: int | None = None, d_v: int | None = None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        d_v = d_model if d_v is None else d_v
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        query, key, value = self.w_q(x), self.w_k(x), self.w_v(x)
        weights = softmax(attention_scores(query, key), dim=-1)  # (B, L, L)
        return weights @ value, weights
