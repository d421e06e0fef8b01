# correct: inline reshape
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
        b, lq, d = query.shape
        h = self.num_heads
        q = self.w_q(query).reshape(b, lq, h, d // h).transpose(1, 2)
        k = self.w_k(key).reshape(b, key.shape[1], h, d // h).transpose(1, 2)
        v = self.w_v(value).reshape(b, value.shape[1], h, d // h).transpose(1, 2)
        out, w = scaled_dot_product_attention(q, k, v, mask, self.dropout if self.training else 0.0)
        return self.w_o(out.transpose(1, 2).reshape(b, lq, d)), w
