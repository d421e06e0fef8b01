# correct: builtin softmax
# source: own

def self_attention(x, w_q, w_k, w_v):
    return torch.softmax((x @ w_q) @ (x @ w_k).transpose(1, 2), dim=2) @ (x @ w_v)
