# student: bruno
# source: written independently from the student release and `check` alone (catalogue/README.md)

class MultiHeadAttention(nn.Module):
    """Multi-head attention, Vaswani et al. (2017) section 3.2.2, batch-first.

    Args:
        d_model: model size ``D``.
        num_heads: number of heads ``h``; ``d_k = D // h``.
        dropout: dropout probability on the attention weights (training mode only).
        bias: whether the projections have biases.

    Shape:
        forward(query ``(B, Lq, D)``, key ``(B, Lk, D)``, value ``(B, Lk, D)``, mask bool
        broadcastable to ``(B, h, Lq, Lk)`` with True = attend)
        -> ``(out (B, Lq, D), weights (B, h, Lq, Lk))``.

    Raises:
        ValueError: if ``d_model % num_heads != 0``.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        # Your part of __init__: refuse a d_model that the heads cannot share equally.
        # YOUR CODE HERE
        if d_model % num_heads != 0:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by num_heads ({num_heads})"
            )

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # YOUR CODE HERE
        batch_size, query_len, d_model = query.shape

        # 1. Project all heads at once: (B, Lq, D) and (B, Lk, D)
        projected_query = self.w_q(query)
        projected_key = self.w_k(key)
        projected_value = self.w_v(value)

        # 2. Split into heads: (B, h, Lq, d_k) and (B, h, Lk, d_k)
        query_heads = split_heads(projected_query, self.num_heads)
        key_heads = split_heads(projected_key, self.num_heads)
        value_heads = split_heads(projected_value, self.num_heads)

        # 3. Attention per head; dropout on the weights only while training
        if self.training:
            dropout_p = self.dropout
        else:
            dropout_p = 0.0
        attended, weights = scaled_dot_product_attention(
            query_heads, key_heads, value_heads, mask=mask, dropout_p=dropout_p
        )  # (B, h, Lq, d_k), (B, h, Lq, Lk)

        # 4. Concatenate the heads and apply the output projection: (B, Lq, D)
        concatenated = combine_heads(attended)
        output = self.w_o(concatenated)
        return output, weights
