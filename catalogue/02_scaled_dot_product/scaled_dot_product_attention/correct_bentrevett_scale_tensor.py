# correct: bentrevett scale tensor
# source: https://github.com/bentrevett/pytorch-seq2seq (6 - Attention is All You Need)

def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    scale = torch.sqrt(torch.tensor([query.shape[-1]], dtype=query.dtype))
    energy = torch.matmul(query, key.transpose(-2, -1)) / scale
    if mask is not None:
        energy = energy.masked_fill(~mask, float('-inf'))
    attention = torch.softmax(energy, dim=-1).nan_to_num(0.0)
    attention = torch.nn.functional.dropout(attention, dropout_p) if dropout_p else attention
    return torch.matmul(attention, value), attention
