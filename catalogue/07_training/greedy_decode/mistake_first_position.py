# mistake: first position
# feedback: LAST position
# source: own

@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = make_padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        h = model.decode(ys, memory, src_mask, make_decoder_mask(ys, model.pad_id))
        nxt = model.generator(h[:, 0]).argmax(-1)
        nxt = torch.where(done, torch.full_like(nxt, model.pad_id), nxt)
        ys = torch.cat([ys, nxt[:, None]], 1)
        done |= nxt == eos_id
        if done.all():
            break
    return ys
