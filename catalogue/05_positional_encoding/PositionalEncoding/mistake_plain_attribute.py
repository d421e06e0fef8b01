# mistake: plain attribute
# feedback: not a registered buffer
# source: own

class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
        self.pe = sinusoidal_positional_encoding(max_len, d_model)

    def forward(self, x):
        if x.size(1) > self.max_len:
            raise ValueError(f'length {x.size(1)} > max_len {self.max_len}')
        return self.dropout(x + self.pe[: x.size(1)])
