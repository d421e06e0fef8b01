# correct: ne index
# source: own

def make_padding_mask(tokens, pad_id):
    return (tokens != pad_id)[:, None, None, :]
