# student: carol
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
        # fixed table: a buffer moves with .to()/.double() but is not trained
        position_table = sinusoidal_positional_encoding(max_len, d_model)
        self.register_buffer("pe", position_table, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sequence_length = x.shape[1]
        if sequence_length > self.max_len:
            raise ValueError(
                f"sequence length {sequence_length} is longer than max_len {self.max_len}"
            )
        # first L rows (L, D) broadcast over the batch
        positions_to_add = self.pe[:sequence_length]
        x_with_positions = x + positions_to_add
        output = self.dropout(x_with_positions)
        return output
