# correct: large negative then zero
# source: own

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    s = query @ key.transpose(-2, -1) / math.sqrt(key.size(-1))
    if mask is not None:
        s = s.masked_fill(mask == 0, -1e9)
    w = s.softmax(-1)
    if mask is not None:
        w = w * mask
    w = F.dropout(w, dropout_p)
    return w @ value, w
