# correct: einsum
# source: own

def attention_scores(query, key):
    return torch.einsum('...qd,...kd->...qk', query, key)
