# correct: unscaled sdpa
# source: own

def self_attention(x, w_q, w_k, w_v):
    return F.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, scale=1.0)
