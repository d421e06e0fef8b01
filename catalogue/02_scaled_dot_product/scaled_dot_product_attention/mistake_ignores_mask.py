# mistake: ignores mask
# feedback: mask is ignored
# source: own

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    w = (query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))).softmax(-1)
    return w @ value, w
