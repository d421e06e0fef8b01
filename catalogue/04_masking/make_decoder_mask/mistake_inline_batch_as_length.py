# mistake: inline batch as length
# feedback: the batch size B = tokens.size(0)
# source: own

def make_decoder_mask(tokens, pad_id):
    t = tokens.size(0)
    causal = torch.ones(t, t, dtype=torch.bool, device=tokens.device).tril()
    return (tokens != pad_id)[:, None, None, :] & causal
