# mistake: flat
# feedback: the attention layer needs (B, 1, 1, L)
# source: own

def make_padding_mask(tokens, pad_id):
    return tokens != pad_id
