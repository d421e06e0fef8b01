# mistake: queries
# feedback: QUERIES
# source: own

def make_decoder_mask(tokens, pad_id):
    return (tokens != pad_id)[:, None, :, None] & make_causal_mask(tokens.size(1))
