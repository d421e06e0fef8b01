# mistake: pads let through
# feedback: has padding at positions [4, 5]
# source: own

def make_padding_mask(tokens, pad_id):
    return (tokens != pad_id + 100)[:, None, None, :]
