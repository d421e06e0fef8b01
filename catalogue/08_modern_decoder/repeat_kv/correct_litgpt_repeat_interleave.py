# correct: litgpt repeat interleave
# source: https://github.com/Lightning-AI/litgpt (litgpt/model.py) (CausalSelfAttention, q_per_kv)

def repeat_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)  # (B, nh_q, T, hs)
