# mistake: max
# feedback: max instead of min
# source: own

def noam_lr(step, d_model, warmup_steps):
    return d_model ** -0.5 * max(step ** -0.5, step * warmup_steps ** -1.5)
