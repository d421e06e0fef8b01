# mistake: no length penalty
# feedback: length penalty is missing
# source: own

@torch.no_grad()
def beam_search(model, src, max_len, bos_id, eos_id, beam_size=4, length_penalty=0.6):
    def score(h):
        return h[1] 
    rows = []
    for row in src:
        row = row[None]
        mask = make_padding_mask(row, model.pad_id)
        memory = model.encode(row, mask)
        beams = [([bos_id], 0.0)]
        while max(len(t) for t, _ in beams) < max_len and not all(t[-1] == eos_id for t, _ in beams):
            cands = []
            for tokens, lp in beams:
                if tokens[-1] == eos_id:
                    cands.append((tokens, lp))
                    continue
                ys = torch.tensor([tokens], device=src.device)
                h = model.decode(ys, memory, mask, make_decoder_mask(ys, model.pad_id))
                step = F.log_softmax(model.generator(h[0, -1]), -1)
                cands += [(tokens + [v], lp + s) for v, s in enumerate(step.tolist())]
            beams = sorted(cands, key=score, reverse=True)[:beam_size]
        rows.append(max(beams, key=score)[0])
    width = max(len(r) for r in rows)
    return torch.tensor([r + [model.pad_id] * (width - len(r)) for r in rows], device=src.device)
