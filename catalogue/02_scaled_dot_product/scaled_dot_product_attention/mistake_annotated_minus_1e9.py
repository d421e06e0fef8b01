# mistake: annotated minus 1e9
# feedback: -1e9
# source: https://github.com/harvardnlp/annotated-transformer (the_annotated_transformer.py) (a finite fill: uniform fully masked rows)

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    p_attn = F.dropout(p_attn, dropout_p)
    return torch.matmul(p_attn, value), p_attn
