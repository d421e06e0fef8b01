"""Reference for notebook 06: the encoder-decoder Transformer.

Source: Vaswani et al. (2017), section 3.1 (encoder and decoder stacks, residual
connections followed by layer normalisation: ``LayerNorm(x + Sublayer(x))``), section 3.3
(position-wise feed-forward networks, equation 2), section 3.4 (embeddings) and
section 5.4 (dropout on every sub-layer output and on the embedding sums).
"""

from __future__ import annotations

import torch
from torch import nn

from .nb03_multi_head import MultiHeadAttention
from .nb04_masking import make_decoder_mask, make_padding_mask
from .nb05_positional_encoding import PositionalEncoding, TokenEmbedding


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Layer normalisation over the last axis, by hand (Ba et al., 2016, eq. 4; paper section 3.1).

    ``(x - mean) / sqrt(var + eps) * weight + bias``, with the mean and the *biased* variance
    (divided by ``D``, not ``D - 1``) of each vector's ``D`` features; equal to
    ``F.layer_norm(x, (D,), weight, bias, eps)``.

    Args:
        x: ``(..., D)`` float tensor.
        weight, bias: ``(D,)``, the learned gain and bias.
        eps: added to the variance, inside the square root.

    Returns:
        ``(..., D)``, the dtype of ``x``.
    """
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).square().mean(dim=-1, keepdim=True)  # biased: divided by D
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


class PositionwiseFeedForward(nn.Module):
    """``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2`` (paper eq. 2), applied to each position.

    Attributes:
        w_1: ``nn.Linear(d_model, d_ff)``; w_2: ``nn.Linear(d_ff, d_model)``.

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))  # (B, L, D)


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each as ``norm(x + dropout(sublayer(x)))`` (post-LN).

    Attributes:
        self_attn: ``MultiHeadAttention``; feed_forward: ``PositionwiseFeedForward``;
        norm1, norm2: ``nn.LayerNorm(d_model)``.

    Shape:
        forward(x ``(B, S, D)``, src_mask bool broadcastable to ``(B, h, S, S)``) -> ``(B, S, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask)[0]))
        return self.norm2(x + self.dropout(self.feed_forward(x)))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over ``memory``, feed-forward; post-LN.

    Attributes:
        self_attn, cross_attn: ``MultiHeadAttention``; feed_forward; norm1, norm2, norm3.

    Shape:
        forward(x ``(B, T, D)``, memory ``(B, S, D)``, src_mask broadcastable to
        ``(B, h, T, S)``, tgt_mask broadcastable to ``(B, h, T, T)``) -> ``(B, T, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)[0]))
        # Queries from the decoder, keys and values from the encoder's output.
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, src_mask)[0]))
        return self.norm3(x + self.dropout(self.feed_forward(x)))


class Encoder(nn.Module):
    """A stack of ``num_layers`` independent ``EncoderLayer``s (no final LayerNorm).

    Shape:
        forward(x ``(B, S, D)`` already embedded, src_mask) -> ``(B, S, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, src_mask)
        return x


class Decoder(nn.Module):
    """A stack of ``num_layers`` independent ``DecoderLayer``s (no final LayerNorm).

    Shape:
        forward(x ``(B, T, D)`` already embedded, memory ``(B, S, D)``, src_mask, tgt_mask)
        -> ``(B, T, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return x


class Transformer(nn.Module):
    """The encoder-decoder Transformer of the paper (figure 1), batch-first.

    Args:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        d_model, num_heads, num_layers, d_ff, dropout: the paper's ``d_model``, ``h``, ``N``,
            ``d_ff``, ``P_drop`` (base model: 512, 8, 6, 2048, 0.1).
        max_len: longest sequence the positional encoding covers.
        pad_id: the padding token id of both vocabularies; ``forward`` masks it.
        tie_embeddings: share one matrix between ``tgt_embed`` and ``generator`` (paper
            section 3.4); default False, each owns its weights.

    Attributes:
        src_embed, tgt_embed (``TokenEmbedding``), positional_encoding (one, shared),
        encoder, decoder, generator (``nn.Linear(d_model, tgt_vocab_size)``, untied unless
        ``tie_embeddings``).

    Shape:
        encode(src ``(B, S)`` int64, src_mask) -> memory ``(B, S, D)``;
        decode(tgt ``(B, T)`` int64, memory, src_mask, tgt_mask) -> ``(B, T, D)``;
        forward(src ``(B, S)``, tgt ``(B, T)``) -> logits ``(B, T, tgt_vocab_size)``.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        pad_id: int = 0,
        tie_embeddings: bool = False,
    ):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = TokenEmbedding(src_vocab_size, d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model)
        self.positional_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        if tie_embeddings:  # paper section 3.4: the generator reuses the target embedding matrix (V, D)
            self.generator.weight = self.tgt_embed.embedding.weight
        # Glorot/Xavier initialisation of every matrix, as in nn.Transformer and the
        # annotated Transformer: the default nn.Embedding N(0, 1) times sqrt(d_model)
        # would swamp the positional encoding.
        for param in self.parameters():
            if param.dim() > 1:
                nn.init.xavier_uniform_(param)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        return self.encoder(self.positional_encoding(self.src_embed(src)), src_mask)  # (B, S, D)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        return self.decoder(self.positional_encoding(self.tgt_embed(tgt)), memory, src_mask, tgt_mask)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_mask = make_padding_mask(src, self.pad_id)  # (B, 1, 1, S)
        tgt_mask = make_decoder_mask(tgt, self.pad_id)  # (B, 1, T, T)
        memory = self.encode(src, src_mask)
        return self.generator(self.decode(tgt, memory, src_mask, tgt_mask))  # (B, T, V_tgt)
