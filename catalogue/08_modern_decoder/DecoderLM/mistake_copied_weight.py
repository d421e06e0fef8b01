# mistake: copied weight
# feedback: COPY
# source: own

class DecoderLM(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_kv_heads, d_ff, num_layers):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(DecoderBlock(d_model, num_heads, num_kv_heads, d_ff) for _ in range(num_layers))
        self.norm = RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = nn.Parameter(self.embedding.weight.clone())
        nn.init.normal_(self.embedding.weight, std=0.02)
        self.lm_head.weight.data = self.embedding.weight.data.clone()

    def forward(self, tokens, past_kvs=None):
        x = self.embedding(tokens)
        presents = []
        for i, layer in enumerate(self.layers):
            x, kv = layer(x, None if past_kvs is None else past_kvs[i])
            presents.append(kv)
        return self.lm_head(self.norm(x)), presents
