# correct: masked fill nan to num
# source: own

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float('-inf'))
    w = torch.nan_to_num(torch.softmax(s, -1))
    w = F.dropout(w, dropout_p) if dropout_p > 0 else w
    return w @ value, w
