# mistake: padding only
# feedback: padding mask only
# source: own

def make_decoder_mask(tokens, pad_id):
    t = tokens.size(1)
    return make_padding_mask(tokens, pad_id).expand(-1, -1, t, -1)
