# student: carol
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
        remainder = d_model % num_heads
        if remainder != 0:
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
        # 1. project with all heads' weights at once
        projected_query = self.w_q(query)  # (B, Lq, D)
        projected_key = self.w_k(key)  # (B, Lk, D)
        projected_value = self.w_v(value)  # (B, Lk, D)
        # 2. split into heads
        query_heads = split_heads(projected_query, self.num_heads)  # (B, h, Lq, d_k)
        key_heads = split_heads(projected_key, self.num_heads)  # (B, h, Lk, d_k)
        value_heads = split_heads(projected_value, self.num_heads)  # (B, h, Lk, d_k)
        # 3. attention in every head; dropout only while training
        if self.training:
            dropout_probability = self.dropout
        else:
            dropout_probability = 0.0
        head_outputs, attention_weights = scaled_dot_product_attention(
            query_heads, key_heads, value_heads, mask, dropout_probability
        )
        # 4. concatenate the heads and mix them with w_o
        combined_output = combine_heads(head_outputs)  # (B, Lq, D)
        output = self.w_o(combined_output)
        return output, attention_weights
