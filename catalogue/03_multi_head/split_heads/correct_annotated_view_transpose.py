# correct: annotated view transpose
# source: https://github.com/harvardnlp/annotated-transformer (the_annotated_transformer.py)

def split_heads(x, num_heads):
    nbatches, length, d_model = x.shape
    return x.view(nbatches, -1, num_heads, d_model // num_heads).transpose(1, 2)
