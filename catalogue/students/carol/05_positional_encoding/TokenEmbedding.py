# student: carol
# source: written independently from the student release and `check` alone (catalogue/README.md)

class TokenEmbedding(nn.Module):
    """Token ids -> vectors times sqrt(d_model) (paper section 3.4).

    Shape:
        forward(tokens ``(B, L)`` int64) -> ``(B, L, d_model)``.
    """

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # look up one vector per token id: (B, L, d_model)
        token_vectors = self.embedding(tokens)
        # scale by sqrt(d_model) as in the paper (a Python float keeps the dtype)
        scale_factor = math.sqrt(self.d_model)
        scaled_vectors = token_vectors * scale_factor
        return scaled_vectors
