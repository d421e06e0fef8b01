# mistake: new on cpu
# feedback: device of `tokens`
# source: own

def make_padding_mask(tokens, pad_id):
    mask = torch.ones(tokens.shape, dtype=torch.bool)
    mask[tokens == pad_id] = False
    return mask[:, None, None, :]
