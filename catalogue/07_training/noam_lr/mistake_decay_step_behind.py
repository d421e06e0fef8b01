# mistake: decay step behind
# feedback: one step behind: steps count from 1
# source: own

def noam_lr(step, d_model, warmup_steps):
    if step < 1:
        raise ValueError('step counts from 1')
    return d_model ** -0.5 * min((step - 1) ** -0.5 if step > 1 else 1.0, step * warmup_steps ** -1.5)
