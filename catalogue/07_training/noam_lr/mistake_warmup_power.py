# mistake: warmup power
# feedback: ^-1.5
# source: own

def noam_lr(step, d_model, warmup_steps):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -0.5)
