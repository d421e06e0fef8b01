# correct: nanogpt inf fill
# source: https://github.com/karpathy/nanoGPT (model.py, CausalSelfAttention)

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    att = (query @ key.transpose(-2, -1)) * (1.0 / math.sqrt(key.size(-1)))
    if mask is not None:
        att = att.masked_fill(mask == 0, float('-inf'))
    att = F.softmax(att, dim=-1)
    att = att.masked_fill(torch.isnan(att), 0.0)  # rows with no key left
    att = F.dropout(att, p=dropout_p, training=dropout_p > 0)
    return att @ value, att
