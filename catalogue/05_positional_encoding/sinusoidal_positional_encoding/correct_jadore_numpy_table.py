# correct: jadore numpy table
# source: https://github.com/jadore801120/attention-is-all-you-need-pytorch (transformer/Models.py)

import numpy as np

def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError('d_model must be even')
    def angles(pos):
        return [pos / np.power(10000, 2 * (j // 2) / d_model) for j in range(d_model)]
    table = np.array([angles(p) for p in range(max_len)])
    table[:, 0::2] = np.sin(table[:, 0::2])
    table[:, 1::2] = np.cos(table[:, 1::2])
    return torch.FloatTensor(table)
