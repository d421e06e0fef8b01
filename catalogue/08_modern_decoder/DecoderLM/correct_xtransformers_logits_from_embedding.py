# correct: xtransformers logits from embedding
# source: https://github.com/lucidrains/x-transformers (x_transformers/x_transformers.py, TransformerWrapper tie_embedding)
# x-transformers' tied output: logits = x @ token_emb.weight.t() (lm_head still holds the same matrix).

class DecoderLM(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_kv_heads, d_ff, num_layers):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(DecoderBlock(d_model, num_heads, num_kv_heads, d_ff)
                                    for _ in range(num_layers))
        self.norm = RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.embedding.weight
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, tokens, past_kvs=None):
        x = self.embedding(tokens)
        presents = []
        for i, layer in enumerate(self.layers):
            x, present = layer(x, past_kvs[i] if past_kvs is not None else None)
            presents.append(present)
        x = self.norm(x)
        return x @ self.embedding.weight.t(), presents
