# student: bruno
# source: written independently from the student release and `check` alone (catalogue/README.md)

class DecoderLayer(nn.Module):
    """One decoder layer (section 3.1): masked self-attention, cross-attention, feed-forward.

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
        # YOUR CODE HERE
        # Sub-layer 1: masked self-attention over the target (padding AND causal mask)
        self_attention_output, _ = self.self_attn(x, x, x, tgt_mask)
        x = self.norm1(x + self.dropout(self_attention_output))
        # Sub-layer 2: cross-attention, queries from the decoder, keys and values from memory
        cross_attention_output, _ = self.cross_attn(x, memory, memory, src_mask)
        x = self.norm2(x + self.dropout(cross_attention_output))
        # Sub-layer 3: feed-forward
        feed_forward_output = self.feed_forward(x)
        x = self.norm3(x + self.dropout(feed_forward_output))
        return x
