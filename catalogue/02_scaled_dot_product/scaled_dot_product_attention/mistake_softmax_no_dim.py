# mistake: softmax no dim
# feedback: without dim= picks
# source: own
# Real: F.softmax without `dim` (deprecated) takes axis 0 of 3-D scores and axis 1 of 4-D ones.

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float('-inf'))
    w = torch.nan_to_num(F.softmax(s))
    return w @ value, w
