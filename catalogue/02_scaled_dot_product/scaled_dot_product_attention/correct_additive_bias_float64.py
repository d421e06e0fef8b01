# correct: additive bias float64
# source: own
# An additive mask needs a finite fill: adding -inf gives NaN gradients on fully blocked rows.

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    q, k = query.double(), key.double()
    s = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    if mask is not None:
        s = s + torch.zeros(mask.shape, dtype=s.dtype).masked_fill(~mask, torch.finfo(s.dtype).min)
    w = torch.softmax(s, -1)
    if mask is not None:
        w = torch.where(mask, w, torch.zeros_like(w))
    w = w.to(query.dtype)
    if dropout_p:
        w = torch.nn.Dropout(dropout_p)(w)
    return w @ value, w
