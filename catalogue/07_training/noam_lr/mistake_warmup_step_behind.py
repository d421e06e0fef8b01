# mistake: warmup step behind
# feedback: one step behind in the warm-up branch
# source: own
# Off by one step (course v5 issue: the feedback said "relative error 1" and nothing else).

def noam_lr(step, d_model, warmup_steps):
    if step < 1:
        raise ValueError('step counts from 1')
    return d_model ** -0.5 * min(step ** -0.5, (step - 1) * warmup_steps ** -1.5)
