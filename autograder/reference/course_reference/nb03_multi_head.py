"""Reference for notebook 03: multi-head attention.

Source: Vaswani et al. (2017), section 3.2.2:
``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O``,
``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``.
"""

from __future__ import annotations

import torch
from torch import nn

from .nb02_scaled_dot_product import scaled_dot_product_attention


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Split the last axis into heads: ``(B, L, D)`` -> ``(B, h, L, d_k)``, ``d_k = D // h``.

    The view must be ``(B, L, h, d_k)`` first (each position's vector cut into ``h``
    slices) and then transposed; ``view(B, h, L, d_k)`` would mix positions into heads.

    Raises:
        ValueError: if ``D`` is not divisible by ``num_heads``.
    """
    batch, length, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)  # (B, h, L, d_k)


def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`split_heads`: ``(B, h, L, d_k)`` -> ``(B, L, h * d_k)``.

    ``transpose`` leaves the tensor non-contiguous, so ``contiguous()`` comes before ``view``.
    """
    batch, num_heads, length, d_k = x.shape
    return x.transpose(1, 2).contiguous().view(batch, length, num_heads * d_k)  # (B, L, D)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (paper section 3.2.2), batch-first.

    Args:
        d_model: model size ``D``.
        num_heads: number of heads ``h``; ``d_k = D // h``.
        dropout: dropout on the attention weights, in training mode only.
        bias: whether the four projections have biases.

    Attributes:
        w_q, w_k, w_v, w_o: ``nn.Linear(d_model, d_model, bias=bias)``.

    Shape:
        forward(query ``(B, Lq, D)``, key ``(B, Lk, D)``, value ``(B, Lk, D)``,
        mask bool broadcastable to ``(B, h, Lq, Lk)``, True = attend)
        -> ``(out (B, Lq, D), weights (B, h, Lq, Lk))``.

    Raises:
        ValueError: if ``d_model % num_heads != 0``.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        q = split_heads(self.w_q(query), self.num_heads)  # (B, h, Lq, d_k)
        k = split_heads(self.w_k(key), self.num_heads)  # (B, h, Lk, d_k)
        v = split_heads(self.w_v(value), self.num_heads)  # (B, h, Lk, d_k)
        p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(q, k, v, mask=mask, dropout_p=p)
        return self.w_o(combine_heads(out)), weights  # (B, Lq, D), (B, h, Lq, Lk)
