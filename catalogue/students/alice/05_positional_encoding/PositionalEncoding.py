# student: alice
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
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        if x.size(1) > self.max_len:
            raise ValueError(f"sequence length {x.size(1)} exceeds max_len={self.max_len}")
        return self.dropout(x + self.pe[: x.size(1)])
