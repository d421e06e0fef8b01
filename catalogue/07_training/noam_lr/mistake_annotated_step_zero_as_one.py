# mistake: annotated step zero as one
# feedback: ValueError
# source: https://github.com/harvardnlp/annotated-transformer (the_annotated_transformer.py)
# The annotated Transformer turns step 0 into step 1, which hides a scheduler's off-by-one.

def noam_lr(step, d_model, warmup_steps):
    factor = 1.0
    if step == 0:
        step = 1
    return factor * (d_model ** (-0.5) * min(step ** (-0.5), step * warmup_steps ** (-1.5)))
