# correct: inline exp log float32
# source: own
# The table built inline in float32 with exp/log (annotated-transformer's way) or pow: its
# float32 rounding must pass the float64 case too (SPEC: tolerances accept float32 formulas).

class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer('pe', pe)

    def forward(self, x):
        if x.size(1) > self.max_len:
            raise ValueError(f'length {x.size(1)} > max_len {self.max_len}')
        return self.dropout(x + self.pe[: x.size(1)])
