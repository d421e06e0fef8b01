# correct: logical and
# source: own

def make_decoder_mask(tokens, pad_id):
    t = tokens.shape[1]
    return torch.logical_and((tokens != pad_id)[:, None, None, :], torch.ones(t, t, dtype=torch.bool, device=tokens.device).tril())
