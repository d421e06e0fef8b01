# correct: no clip tensor sum
# source: own

def train_epoch(model, loader, optimizer, scheduler, loss_fn, device):
    model.train()
    total, n = 0.0, 0
    for src, tgt in loader:
        src, tgt = src.to(device), tgt.to(device)
        dec_in, labels = make_teacher_forcing_batch(tgt, model.pad_id)
        loss = loss_fn(model(src, dec_in), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        k = int((labels != model.pad_id).sum())
        total += loss.item() * k
        n += k
    return total / n
