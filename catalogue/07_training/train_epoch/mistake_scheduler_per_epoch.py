# mistake: scheduler per epoch
# feedback: once per batch
# source: own

def train_epoch(model, loader, optimizer, scheduler, loss_fn, device):
    model.train()
    total, n = 0.0, 0
    for src, tgt in loader:
        src, tgt = src.to(device), tgt.to(device)
        dec_in, labels = make_teacher_forcing_batch(tgt, model.pad_id)
        loss = loss_fn(model(src, dec_in), labels)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        k = int((labels != model.pad_id).sum())
        total += loss.item() * k
        n += k
    if scheduler is not None:
        scheduler.step()
    return total / n
