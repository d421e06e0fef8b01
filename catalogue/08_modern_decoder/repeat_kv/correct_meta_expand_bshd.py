# correct: meta expand bshd
# source: https://github.com/meta-llama/llama (llama/model.py: RMSNorm, apply_rotary_emb, repeat_kv, Attention, FeedForward, TransformerBlock) (repeat_kv)
# Meta's repeat_kv works on (bs, slen, n_kv_heads, head_dim): transpose in and out of it.

def repeat_kv(x, n_rep):
    x = x.transpose(1, 2)  # (bs, slen, n_kv_heads, head_dim), Meta's layout
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep != 1:
        x = x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim).reshape(
            bs, slen, n_kv_heads * n_rep, head_dim)
    return x.transpose(1, 2)
