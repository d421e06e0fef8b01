# correct: hf expand reshape
# source: https://github.com/huggingface/transformers (src/transformers/models/llama/modeling_llama.py) (repeat_kv)

def repeat_kv(x, n_rep):
    batch, num_key_value_heads, slen, head_dim = x.shape
    if n_rep == 1:
        return x
    x = x[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return x.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)
