# mistake: step ahead
# feedback: rate of step + 1
# source: own

def noam_lr(step, d_model, warmup_steps):
    if step < 1:
        raise ValueError('step counts from 1')
    step = step + 1
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)
