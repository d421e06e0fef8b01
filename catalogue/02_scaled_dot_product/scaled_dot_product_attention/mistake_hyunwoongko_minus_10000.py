# mistake: hyunwoongko minus 10000
# feedback: -1e9
# source: https://github.com/hyunwoongko/transformer/issues/10

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    batch_size, length, d_tensor = key.size(0), key.size(-2), key.size(-1)
    score = (query @ key.transpose(-2, -1)) / math.sqrt(d_tensor)
    if mask is not None:
        score = score.masked_fill(mask == 0, -10000)
    score = torch.softmax(score, dim=-1)
    v = score @ value
    return v, score
