# mistake: nanogpt builtin
# feedback: built-in
# source: https://github.com/karpathy/nanoGPT (model.py, CausalSelfAttention) (class LayerNorm wraps F.layer_norm)

def layer_norm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, weight.shape, weight, bias, 1e-5)
