# mistake: onnxim divide by num kv heads
# feedback: j // h_kv
# source: https://github.com/PSAL-POSTECH/ONNXim/pull/34

def repeat_kv(x, n_rep):
    num_kv_heads = x.size(1)
    head_idx = torch.arange(num_kv_heads * n_rep, device=x.device)
    kv_head_idx = head_idx // num_kv_heads
    return x.index_select(1, kv_head_idx)
