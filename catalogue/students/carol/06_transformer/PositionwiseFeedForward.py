# student: carol
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
        # widen every position: (B, L, D) -> (B, L, d_ff)
        hidden_pre_activation = self.w_1(x)
        hidden_activation = F.relu(hidden_pre_activation)
        # dropout on the hidden units (only active in train mode)
        hidden_after_dropout = self.dropout(hidden_activation)
        # back to the model size: (B, L, d_ff) -> (B, L, D)
        output = self.w_2(hidden_after_dropout)
        return output
