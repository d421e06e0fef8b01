# correct: branches
# source: own

def noam_lr(step, d_model, warmup_steps):
    if step < 1:
        raise ValueError('step counts from 1')
    if step < warmup_steps:
        return step / (math.sqrt(d_model) * warmup_steps ** 1.5)
    return 1 / math.sqrt(d_model * step)
