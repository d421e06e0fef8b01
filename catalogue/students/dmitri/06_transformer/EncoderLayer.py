# student: dmitri
# source: written independently from the student release and `check` alone (catalogue/README.md)

class EncoderLayer(nn.Module):
    """One encoder layer (section 3.1): self-attention and feed-forward, each post-LN.

    Args:
        d_model, num_heads, d_ff: sizes; dropout: on each sub-layer output and inside
            attention and the feed-forward network.

    Shape:
        forward(x ``(B, S, D)``, src_mask bool broadcastable to ``(B, h, S, S)``,
        True = attend) -> ``(B, S, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        an = lambda n, x, y: n(x + self.dropout(y))
        x = an(self.norm1, x, self.self_attn(x, x, x, src_mask)[0])
        return an(self.norm2, x, self.feed_forward(x))
