# mistake: dropout not rescaled
# feedback: 1/(1 - p)
# source: own

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float('-inf'))
    w = torch.nan_to_num(s.softmax(-1))
    if dropout_p > 0:
        w = w * (torch.rand_like(w) > dropout_p)
    return w @ value, w
