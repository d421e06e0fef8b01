# correct: view
# source: own

def make_padding_mask(tokens, pad_id):
    b, l = tokens.shape
    return ~(tokens == pad_id).view(b, 1, 1, l)
