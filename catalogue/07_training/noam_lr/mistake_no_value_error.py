# mistake: no value error
# feedback: ValueError
# source: own
# The docstring asks for ValueError at step < 1: 0 ** -0.5 raises ZeroDivisionError instead.

def noam_lr(step, d_model, warmup_steps):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)
