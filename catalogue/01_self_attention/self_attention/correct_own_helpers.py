# correct: own helpers
# source: own

def self_attention(x, w_q, w_k, w_v):
    return softmax(attention_scores(x @ w_q, x @ w_k), dim=-1) @ (x @ w_v)
