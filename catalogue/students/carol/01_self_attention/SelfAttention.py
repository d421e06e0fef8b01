# student: carol
# source: written independently from the student release and `check` alone (catalogue/README.md)

class SelfAttention(nn.Module):
    """Single-head self-attention with learned projections (no bias, no scale).

    Args:
        d_model: size ``D`` of the input vectors.
        d_k: size of queries and keys (default ``d_model``).
        d_v: size of values and of the output (default ``d_model``).

    Shape:
        forward(x): ``x (B, L, D)`` -> ``(out (B, L, d_v), weights (B, L, L))``.
    """

    def __init__(self, d_model: int, d_k: int | None = None, d_v: int | None = None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        d_v = d_model if d_v is None else d_v
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # learned projections of the same input
        queries = self.w_q(x)  # (B, L, d_k)
        keys = self.w_k(x)  # (B, L, d_k)
        values = self.w_v(x)  # (B, L, d_v)
        # scores and weights over the keys
        scores = attention_scores(queries, keys)  # (B, L, L)
        attention_weights = softmax(scores, dim=-1)
        # mix the values with the weights
        output = torch.matmul(attention_weights, values)  # (B, L, d_v)
        return output, attention_weights
