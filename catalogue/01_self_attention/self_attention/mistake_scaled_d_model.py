# mistake: scaled d model
# feedback: 1/sqrt(d_model)
# source: own

def self_attention(x, w_q, w_k, w_v):
    s = attention_scores(x @ w_q, x @ w_k) / math.sqrt(x.shape[-1])
    return softmax(s, -1) @ (x @ w_v)
