# correct: batched
# source: own

@torch.no_grad()
def beam_search(model, src, max_len, bos_id, eos_id, beam_size=4, length_penalty=0.6):
    B, K, pad = src.size(0), beam_size, model.pad_id
    mask = make_padding_mask(src, pad).repeat_interleave(K, 0)
    memory = model.encode(src, make_padding_mask(src, pad)).repeat_interleave(K, 0)
    dev = src.device
    ys = torch.full((B * K, 1), bos_id, device=dev)
    score_lp = torch.full((B, K), float('-inf'), device=dev)
    score_lp[:, 0] = 0
    done = torch.zeros(B, K, dtype=torch.bool, device=dev)
    n = torch.zeros(B, K, device=dev)
    lp = lambda length: ((5 + length) / 6) ** length_penalty
    for t in range(1, max_len):
        if done.all():
            break
        logp = model.generator(model.decode(ys, memory, mask, make_decoder_mask(ys, pad))[:, -1]).log_softmax(-1)
        V = logp.size(-1)
        cand = score_lp[..., None] + logp.view(B, K, V)
        cand = torch.where(done[..., None], torch.full_like(cand, float('-inf')), cand)
        cand[..., pad] = torch.where(done, score_lp, cand[..., pad])
        length = torch.where(done[..., None], n[..., None], torch.full_like(cand, t))
        idx = (cand / lp(length)).view(B, -1).topk(K).indices
        beam, tok = idx // V, idx % V
        r = torch.arange(B, device=dev)[:, None]
        score_lp, n = cand.view(B, -1).gather(1, idx), length.view(B, -1).gather(1, idx)
        done = done[r, beam] | (tok == eos_id)
        ys = torch.cat([ys.view(B, K, -1)[r, beam], tok[..., None]], -1).view(B * K, -1)
    best = (score_lp / lp(n)).argmax(-1)
    rows = torch.arange(B, device=dev)
    out = ys.view(B, K, -1)[rows, best]
    return out[:, :1 + int(n[rows, best].max())]
