# mistake: averaged weights
# feedback: averaged over heads
# source: own

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError('d_model must be divisible by num_heads')
        self.num_heads, self.dropout = num_heads, dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        h = self.num_heads
        q, k, v = split_heads(self.w_q(query), h), split_heads(self.w_k(key), h), split_heads(self.w_v(value), h)
        out, w = scaled_dot_product_attention(q, k, v, mask=mask, dropout_p=self.dropout if self.training else 0.0)
        return self.w_o(combine_heads(out)), w.mean(1)
