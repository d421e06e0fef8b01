# correct: annotated rate with check
# source: https://github.com/harvardnlp/annotated-transformer (the_annotated_transformer.py), with the ValueError the exercise asks for

def noam_lr(step, d_model, warmup_steps):
    factor = 1.0
    if step < 1:
        raise ValueError('step counts from 1')
    return factor * (d_model ** (-0.5) * min(step ** (-0.5), step * warmup_steps ** (-1.5)))
