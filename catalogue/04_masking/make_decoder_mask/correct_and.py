# correct: and
# source: own

def make_decoder_mask(tokens, pad_id):
    return make_padding_mask(tokens, pad_id) & make_causal_mask(tokens.size(1), tokens.device)
