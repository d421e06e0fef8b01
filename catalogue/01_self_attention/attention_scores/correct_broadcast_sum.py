# correct: broadcast sum
# source: own

def attention_scores(query, key):
    return (query.unsqueeze(-2) * key.unsqueeze(-3)).sum(-1)
