# mistake: no d model
# feedback: d_model^-0.5 factor
# source: own

def noam_lr(step, d_model, warmup_steps):
    return min(step ** -0.5, step * warmup_steps ** -1.5)
