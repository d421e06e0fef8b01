# correct: chunk stack
# source: own

def split_heads(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)
