# mistake: view heads first
# feedback: transpose
# source: https://github.com/hyunwoongko/transformer/issues/15

def split_heads(x, num_heads):
    B, L, D = x.shape
    return x.view(B, num_heads, L, D // num_heads)
