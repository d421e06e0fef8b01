# mistake: mosaic untied
# feedback: tie them
# source: https://github.com/mosaicml/examples/pull/11

class DecoderLM(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_kv_heads, d_ff, num_layers):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(DecoderBlock(d_model, num_heads, num_kv_heads, d_ff)
                                    for _ in range(num_layers))
        self.norm = RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, tokens, past_kvs=None):
        h = self.embedding(tokens)
        presents = []
        for i, layer in enumerate(self.layers):
            h, present = layer(h, None if past_kvs is None else past_kvs[i])
            presents.append(present)
        return self.lm_head(self.norm(h)), presents
