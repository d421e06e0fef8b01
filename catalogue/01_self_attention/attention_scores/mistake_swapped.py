# mistake: swapped
# feedback: axes swapped
# source: own

def attention_scores(query, key):
    return key @ query.transpose(-2, -1)
