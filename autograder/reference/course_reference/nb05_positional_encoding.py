"""Reference for notebook 05: sinusoidal positional encoding and scaled token embeddings.

Source: Vaswani et al. (2017), section 3.5 (positional encoding) and 3.4 (embeddings
multiplied by sqrt(d_model)).
"""

from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """``PE[p, 2i] = sin(p / 10000^(2i/D))``, ``PE[p, 2i+1] = cos(p / 10000^(2i/D))``.

    Returns:
        float32 ``(max_len, d_model)``.

    Raises:
        ValueError: if ``d_model`` is odd (sin and cos come in pairs).
    """
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even (sin/cos pairs), got {d_model}")
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    inv_freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    angles = position * inv_freq  # (max_len, D/2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.float()


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table to token vectors, then applies dropout (paper section 3.5, 5.4).

    Attributes:
        pe: buffer ``(max_len, d_model)``, moves with ``.to(device)``, never trained.

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.

    Raises:
        ValueError: in forward, when ``L > max_len``.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
        # Not persistent: the table is a function of (max_len, d_model), recomputed on load.
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.size(1)
        if length > self.max_len:
            raise ValueError(f"sequence length {length} exceeds max_len={self.max_len}")
        return self.dropout(x + self.pe[:length].to(x.dtype))


class TokenEmbedding(nn.Module):
    """Token ids -> vectors scaled by ``sqrt(d_model)`` (paper section 3.4).

    Attributes:
        embedding: ``nn.Embedding(vocab_size, d_model)``.

    Shape:
        forward(tokens ``(B, L)`` int64) -> ``(B, L, d_model)``.
    """

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embedding(tokens) * math.sqrt(self.d_model)
