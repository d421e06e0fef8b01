# student: alice
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
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # YOUR CODE HERE
        h = self.num_heads
        o, w = scaled_dot_product_attention(
            split_heads(self.w_q(query), h), split_heads(self.w_k(key), h), split_heads(self.w_v(value), h),
            mask, self.dropout if self.training else 0.0,
        )
        return self.w_o(combine_heads(o)), w
