# mistake: inverted
# feedback: has no padding and your mask for it is [0, 0, 0, 0, 0, 0] (1 = may attend); in the batch its real positions differ from the sentence run alone: the mask is inverted
# source: own

def make_padding_mask(tokens, pad_id):
    return (tokens == pad_id)[:, None, None, :]
