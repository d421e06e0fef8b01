# mistake: three dims
# feedback: (B, 1, L)
# source: own

def make_padding_mask(tokens, pad_id):
    return (tokens != pad_id).unsqueeze(1)
