# correct: inline pow float32
# source: own

class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
        pos = torch.arange(max_len, dtype=torch.float32)[:, None]
        i = torch.arange(0, d_model, 2, dtype=torch.float32)
        angle = pos / torch.pow(10000.0, i / d_model)
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle.cos()
        self.register_buffer('pe', pe)

    def forward(self, x):
        if x.size(1) > self.max_len:
            raise ValueError(f'length {x.size(1)} > max_len {self.max_len}')
        return self.dropout(x + self.pe[: x.size(1)])
