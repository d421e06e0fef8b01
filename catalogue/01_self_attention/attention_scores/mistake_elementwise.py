# mistake: elementwise
# feedback: raised RuntimeError
# source: own

def attention_scores(query, key):
    return (query * key).sum(-1)
