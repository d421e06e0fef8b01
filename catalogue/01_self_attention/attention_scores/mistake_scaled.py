# mistake: scaled
# feedback: scaled by 1/sqrt(d_k)
# source: own

def attention_scores(query, key):
    return query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
