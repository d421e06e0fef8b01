# correct: tensor
# source: own

def noam_lr(step, d_model, warmup_steps):
    if not step >= 1:
        raise ValueError(f'step must be >= 1, got {step}')
    s = torch.tensor(float(step), dtype=torch.float64)
    return torch.rsqrt(torch.tensor(float(d_model), dtype=torch.float64)) * torch.minimum(s.rsqrt(), s * warmup_steps ** -1.5)
