# mistake: additive inf nan to num
# feedback: instead of adding -inf
# source: own

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        s = s + torch.zeros(mask.shape, dtype=s.dtype).masked_fill(~mask, float('-inf'))
    w = torch.nan_to_num(s.softmax(-1))
    if dropout_p > 0:
        w = F.dropout(w, dropout_p)
    return w @ value, w
