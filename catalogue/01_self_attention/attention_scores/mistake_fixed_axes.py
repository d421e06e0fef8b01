# mistake: fixed axes
# feedback: count the axes from the end
# source: own

def attention_scores(query, key):
    return query @ key.transpose(1, 2)
