# correct: filled
# source: own

def make_padding_mask(tokens, pad_id):
    mask = torch.ones(tokens.shape, dtype=torch.bool, device=tokens.device)
    mask[tokens == pad_id] = False
    return mask[:, None, None, :]
