# mistake: dropout after sum
# feedback: residual sum
# source: own
# From the course v3 issue: a layer that never calls self.dropout scored full marks.

class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, src_mask):
        x = self.norm1(self.dropout(x + self.self_attn(x, x, x, src_mask)[0]))
        return self.norm2(self.dropout(x + self.feed_forward(x)))
