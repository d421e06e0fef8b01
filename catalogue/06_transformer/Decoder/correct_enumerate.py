# correct: enumerate
# source: own

class Decoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])

    def forward(self, x, memory, src_mask, tgt_mask):
        h = x
        for i, layer in enumerate(self.layers):
            h = self.layers[i](h, memory, src_mask=src_mask, tgt_mask=tgt_mask)
        return h
