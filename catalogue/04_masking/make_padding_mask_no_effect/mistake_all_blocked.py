# mistake: all blocked
# feedback: a sentence without padding must have every key allowed
# source: own

def make_padding_mask(tokens, pad_id):
    return torch.zeros_like(tokens, dtype=torch.bool)[:, None, None, :]
