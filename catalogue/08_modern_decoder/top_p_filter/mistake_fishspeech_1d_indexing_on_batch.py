# mistake: fishspeech 1d indexing on batch
# feedback: shift by one is along the rows
# source: https://github.com/fishaudio/fish-speech/pull/1326

def top_p_filter(logits, top_p):
    if not 0 < top_p <= 1:
        raise ValueError(f'top_p must be in (0, 1], got {top_p}')
    sorted_logits, sorted_indices = torch.sort(logits, descending=True, stable=True)
    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
    sorted_indices_to_remove = cum_probs >= top_p
    sorted_indices_to_remove[1:] = sorted_indices_to_remove[:-1].clone()
    sorted_indices_to_remove[0] = False  # keep at least one option
    indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)
    return logits.masked_fill(indices_to_remove, float('-inf'))
