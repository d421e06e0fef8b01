# mistake: float
# feedback: bool tensor
# source: own

def make_padding_mask(tokens, pad_id):
    return (tokens != pad_id).float()[:, None, None, :]
