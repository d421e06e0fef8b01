# mistake: trtllm first cache for every layer
# feedback: past_kvs[0]
# source: https://github.com/NVIDIA/TensorRT-LLM/pull/2682

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
        presents = []
        for layer in self.layers:
            h, present = layer(h, None if past_kvs is None else past_kvs[0])
            presents.append(present)
        return self.lm_head(self.norm(h)), presents
