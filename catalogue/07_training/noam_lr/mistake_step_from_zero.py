# mistake: step from zero
# feedback: from 0
# source: own

def noam_lr(step, d_model, warmup_steps):
    step = max(step - 1, 1e-9)
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)
