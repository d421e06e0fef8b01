# mistake: hardcoded zero
# feedback: ignores pad_id
# source: own

def make_padding_mask(tokens, pad_id):
    return (tokens != 0)[:, None, None, :]
