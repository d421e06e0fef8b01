# student: bruno
# source: written independently from the student release and `check` alone (catalogue/README.md)

class PositionalEncoding(nn.Module):
    """Add sinusoidal positions, then dropout (paper sections 3.5 and 5.4).

    Args:
        d_model: model size ``D``.
        dropout: dropout probability after the addition.
        max_len: longest sequence supported.

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.

    Raises:
        ValueError: in forward, if ``L > max_len``.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
        # YOUR CODE HERE
        table = sinusoidal_positional_encoding(max_len, d_model)  # (max_len, D)
        # A buffer: moves with .to() and .double(), but is not trained; kept out of checkpoints
        self.register_buffer("pe", table, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        batch_size, seq_len, d_model = x.shape
        if seq_len > self.max_len:
            raise ValueError(
                f"sequence length {seq_len} is longer than max_len {self.max_len} of the positional table"
            )
        # First L rows of the table, (L, D), broadcast over the batch
        positions = self.pe[:seq_len]
        summed = x + positions
        output = self.dropout(summed)
        return output
