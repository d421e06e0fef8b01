# student: alice
# source: written independently from the student release and `check` alone (catalogue/README.md)

class Decoder(nn.Module):
    """``num_layers`` independent ``DecoderLayer``s in sequence, all attending to ``memory``.

    Shape:
        forward(x ``(B, T, D)`` embedded, memory ``(B, S, D)``, src_mask, tgt_mask) -> ``(B, T, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        # YOUR CODE HERE
        for l in self.layers:
            x = l(x, memory, src_mask, tgt_mask)
        return x
