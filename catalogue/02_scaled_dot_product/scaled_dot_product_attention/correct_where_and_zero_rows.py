# correct: where and zero rows
# source: own

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    s = torch.einsum('...qd,...kd->...qk', query, key) * query.shape[-1] ** -0.5
    if mask is not None:
        s = torch.where(mask, s, float('-inf'))
    w = s.softmax(-1)
    if mask is not None:
        w = torch.where(mask, w, 0.0)
    w = F.dropout(w, p=dropout_p, training=True)
    return torch.einsum('...qk,...kd->...qd', w, value), w
