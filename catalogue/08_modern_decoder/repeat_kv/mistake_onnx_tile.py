# mistake: onnx tile
# feedback: repeated as a whole
# source: https://github.com/onnx/onnx/pull/7274

def repeat_kv(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)
