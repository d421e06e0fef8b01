# mistake: parlai all beams expanded
# feedback: copies of <bos>
# source: https://github.com/facebookresearch/ParlAI/issues/2007 (every beam starts from <bos>: same sentence K times)

@torch.no_grad()
def beam_search(model, src, max_len, bos_id, eos_id, beam_size=4, length_penalty=0.6):
    lp = lambda n: ((5.0 + n) / 6.0) ** length_penalty
    out = []
    for row in src:
        row = row[None]
        mask = make_padding_mask(row, model.pad_id)
        memory = model.encode(row, mask)
        K = beam_size
        dev = src.device  # ParlAI keeps its beams on the model's device
        ys = torch.full((K, 1), bos_id, device=dev)
        scores = torch.zeros(K, device=dev)
        done = torch.zeros(K, dtype=torch.bool, device=dev)
        lengths = torch.zeros(K, device=dev)
        for t in range(1, max_len):
            if done.all():
                break
            h = model.decode(ys, memory.expand(K, -1, -1), mask, make_decoder_mask(ys, model.pad_id))
            logprobs = F.log_softmax(model.generator(h[:, -1]), -1)
            V = logprobs.size(-1)
            cand = scores[:, None] + logprobs
            cand = torch.where(done[:, None], torch.full_like(cand, float('-inf')), cand)
            cand[:, model.pad_id] = torch.where(done, scores, cand[:, model.pad_id])
            n = torch.where(done[:, None], lengths[:, None], torch.full_like(cand, float(t)))
            ranked = cand / lp(n)
            idx = ranked.reshape(-1).topk(K).indices
            beam, tok = idx // V, idx % V
            scores, lengths = cand[beam, tok], n[beam, tok]
            done = done[beam] | (tok == eos_id)
            ys = torch.cat([ys[beam], tok[:, None]], 1)
        best = int((scores / lp(lengths)).argmax())
        out.append(ys[best, :1 + int(lengths[best])].tolist())
    width = max(len(r) for r in out)
    return torch.tensor([r + [model.pad_id] * (width - len(r)) for r in out], device=src.device)
