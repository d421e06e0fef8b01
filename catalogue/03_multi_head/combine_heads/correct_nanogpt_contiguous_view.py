# correct: nanogpt contiguous view
# source: https://github.com/karpathy/nanoGPT (model.py, CausalSelfAttention)

def combine_heads(x):
    B, nh, T, hs = x.size()
    return x.transpose(1, 2).contiguous().view(B, T, nh * hs)
