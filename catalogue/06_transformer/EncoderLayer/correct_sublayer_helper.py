# correct: sublayer helper
# source: own

class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def _residual(self, x, f, norm):
        return norm(x + self.dropout(f(x)))

    def forward(self, x, src_mask):
        x = self._residual(x, lambda y: self.self_attn(y, y, y, mask=src_mask)[0], self.norm1)
        return self._residual(x, self.feed_forward, self.norm2)
