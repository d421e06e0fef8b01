# mistake: softmax batch axis
# feedback: the batch axis
# source: own

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float('-inf'))
    w = torch.nan_to_num(torch.softmax(s, dim=0))
    return w @ value, w
