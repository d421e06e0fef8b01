# mistake: log softmax
# feedback: log-probabilities
# source: own

class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=512, num_heads=8, num_layers=6,
                 d_ff=2048, dropout=0.1, max_len=5000, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = TokenEmbedding(src_vocab_size, d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model)
        self.positional_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src, src_mask):
        return self.encoder(self.positional_encoding(self.src_embed(src)), src_mask)

    def decode(self, tgt, memory, src_mask, tgt_mask):
        return self.decoder(self.positional_encoding(self.tgt_embed(tgt)), memory, src_mask, tgt_mask)

    def forward(self, src, tgt):
        src_mask = make_padding_mask(src, self.pad_id)
        tgt_mask = make_decoder_mask(tgt, self.pad_id)
        return F.log_softmax(self.generator(self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)), -1)
