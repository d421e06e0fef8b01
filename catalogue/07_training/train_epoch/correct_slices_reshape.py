# correct: slices reshape
# source: own

def train_epoch(model, loader, optimizer, scheduler, loss_fn, device):
    model.train()
    total, n = 0.0, 0
    for src, tgt in loader:
        src, tgt = src.to(device), tgt.to(device)
        dec_in, labels = tgt[:, :-1], tgt[:, 1:]
        logits = model(src, dec_in)
        loss = loss_fn(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        k = int((labels != model.pad_id).sum())
        total += loss.item() * k
        n += k
    return total / n
