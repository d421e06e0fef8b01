# student: carol
# source: written independently from the student release and `check` alone (catalogue/README.md)

class Encoder(nn.Module):
    """``num_layers`` independent ``EncoderLayer``s in sequence (section 3.1).

    Shape:
        forward(x ``(B, S, D)`` embedded, src_mask) -> ``(B, S, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        # each layer refines the previous layer's output; the mask stays the same
        hidden_states = x
        for encoder_layer in self.layers:
            hidden_states = encoder_layer(hidden_states, src_mask)
        return hidden_states
