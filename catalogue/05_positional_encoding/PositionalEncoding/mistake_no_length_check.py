# mistake: no length check
# feedback: raise a ValueError
# source: own

class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
        self.register_buffer('pe', sinusoidal_positional_encoding(max_len, d_model))

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])
