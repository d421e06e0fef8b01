# mistake: returns weights
# feedback: returns the attention weights
# source: own

def self_attention(x, w_q, w_k, w_v):
    return softmax(attention_scores(x @ w_q, x @ w_k), -1)
