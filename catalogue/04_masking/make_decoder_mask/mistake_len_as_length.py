# mistake: len as length
# feedback: use tokens.size(1)
# source: own

def make_decoder_mask(tokens, pad_id):
    return make_padding_mask(tokens, pad_id) & make_causal_mask(len(tokens), tokens.device)
