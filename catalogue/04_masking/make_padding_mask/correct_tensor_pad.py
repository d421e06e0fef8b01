# correct: tensor pad
# source: own

def make_padding_mask(tokens, pad_id):
    return tokens.ne(torch.tensor(pad_id))[:, None, None, :]
