# mistake: hyunwoongko fixed axes
# feedback: raised IndexError
# source: https://github.com/hyunwoongko/transformer (models/layers/scale_dot_product_attention.py)

def attention_scores(query, key):
    k_t = key.transpose(2, 3)
    return query @ k_t
