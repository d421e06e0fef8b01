# mistake: builtin
# feedback: built-in
# source: own

def layer_norm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
