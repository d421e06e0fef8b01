# mistake: uniform rows
# feedback: -1e9
# source: own

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, -1e9)
    w = s.softmax(-1)
    return w @ value, w
