# correct: finished hypotheses kept in a list of their own, live ones first
# source: https://github.com/pytorch/translate/blob/master/pytorch_translate/research/beam_search/competing_completed.py (completed hypotheses stay in the beam and compete with longer ones until all kept ones are completed)
# Same rule as the reference, other slot order: the live hypotheses come before the finished ones
# when candidates are ranked and when the best is chosen, so an exact tie would go the other way.

@torch.no_grad()
def beam_search(model, src, max_len, bos_id, eos_id, beam_size=4, length_penalty=0.6):
    def normalised(hyp):
        tokens, log_prob = hyp
        return log_prob / ((5 + len(tokens) - 1) / 6) ** length_penalty

    best_per_row = []
    for i in range(src.size(0)):
        source = src[i:i + 1]
        src_mask = make_padding_mask(source, model.pad_id)
        memory = model.encode(source, src_mask)
        live, finished = [([bos_id], 0.0)], []
        while live and len(live[0][0]) < max_len:
            candidates = []
            for tokens, log_prob in live:
                ys = torch.tensor([tokens], dtype=torch.long, device=src.device)
                out = model.decode(ys, memory, src_mask, make_decoder_mask(ys, model.pad_id))
                log_probs = F.log_softmax(model.generator(out[:, -1]), dim=-1)[0].tolist()
                candidates.extend((tokens + [token], log_prob + lp) for token, lp in enumerate(log_probs))
            kept = sorted(candidates + finished, key=normalised, reverse=True)[:beam_size]
            live = [h for h in kept if h[0][-1] != eos_id]
            finished = [h for h in kept if h[0][-1] == eos_id]
        best_per_row.append(max(live + finished, key=normalised)[0])
    width = max(len(tokens) for tokens in best_per_row)
    out = torch.full((len(best_per_row), width), model.pad_id, dtype=torch.long, device=src.device)
    for i, tokens in enumerate(best_per_row):
        out[i, :len(tokens)] = torch.tensor(tokens, dtype=torch.long, device=src.device)
    return out
