# correct: einsum
# source: own

def self_attention(x, w_q, w_k, w_v):
    q, k, v = (torch.einsum('bld,de->ble', x, w) for w in (w_q, w_k, w_v))
    a = F.softmax(torch.einsum('bqe,bke->bqk', q, k), -1)
    return torch.einsum('bqk,bke->bqe', a, v)
