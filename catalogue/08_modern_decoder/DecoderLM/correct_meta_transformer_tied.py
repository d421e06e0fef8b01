# correct: meta transformer tied
# source: https://github.com/meta-llama/llama (llama/model.py: RMSNorm, apply_rotary_emb, repeat_kv, Attention, FeedForward, TransformerBlock) (Transformer), tied as the course asks

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
        h = self.embedding(tokens)
        past_kvs = [None] * len(self.layers) if past_kvs is None else past_kvs
        presents = []
        for layer, past in zip(self.layers, past_kvs):
            h, present = layer(h, past)
            presents.append(present)
        h = self.norm(h)
        return self.lm_head(h).float(), presents
