# correct: mT
# source: own

def attention_scores(query, key):
    return query @ key.mT
