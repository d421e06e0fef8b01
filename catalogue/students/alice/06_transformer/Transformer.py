# student: alice
# source: written independently from the student release and `check` alone (catalogue/README.md)

class Transformer(nn.Module):
    """The encoder-decoder Transformer, Vaswani et al. (2017) figure 1, batch-first.

    Args:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        d_model, num_heads, num_layers, d_ff, dropout: the paper's D, h, N, d_ff, P_drop.
        max_len: the longest sequence the positional encoding covers.
        pad_id: the padding id of both sides; ``forward`` masks it.
        tie_embeddings: share one matrix between ``tgt_embed`` and ``generator`` (paper
            section 3.4); default False, each owns its weights.

    Shape:
        encode(src ``(B, S)`` int64, src_mask) -> memory ``(B, S, D)``;
        decode(tgt ``(B, T)`` int64, memory, src_mask, tgt_mask) -> ``(B, T, D)``;
        forward(src ``(B, S)``, tgt ``(B, T)``) -> logits ``(B, T, tgt_vocab_size)``.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        pad_id: int = 0,
        tie_embeddings: bool = False,
    ):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = TokenEmbedding(src_vocab_size, d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model)
        self.positional_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        if tie_embeddings:  # paper section 3.4: the generator reuses the target embedding matrix (V, D)
            self.generator.weight = self.tgt_embed.embedding.weight
        for param in self.parameters():
            if param.dim() > 1:
                nn.init.xavier_uniform_(param)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        # YOUR CODE HERE
        return self.encoder(self.positional_encoding(self.src_embed(src)), src_mask)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        # YOUR CODE HERE
        return self.decoder(self.positional_encoding(self.tgt_embed(tgt)), memory, src_mask, tgt_mask)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        m = make_padding_mask(src, self.pad_id)
        return self.generator(self.decode(tgt, self.encode(src, m), m, make_decoder_mask(tgt, self.pad_id)))
