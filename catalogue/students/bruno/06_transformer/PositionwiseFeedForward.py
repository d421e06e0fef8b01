# student: bruno
# source: written independently from the student release and `check` alone (catalogue/README.md)

class PositionwiseFeedForward(nn.Module):
    """Position-wise feed-forward network, Vaswani et al. (2017) section 3.3, eq. (2).

    Args:
        d_model: input and output size ``D``.
        d_ff: inner size.
        dropout: dropout probability on the inner activations (training mode only).

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        hidden = self.w_1(x)  # (B, L, d_ff)
        hidden = F.relu(hidden)
        hidden = self.dropout(hidden)  # dropout on the hidden activations
        output = self.w_2(hidden)  # (B, L, D)
        return output
