# student: alice
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
        # YOUR CODE HERE
        return self.embedding(tokens) * math.sqrt(self.d_model)
