# correct: bentrevett permute
# source: https://github.com/bentrevett/pytorch-seq2seq (6 - Attention is All You Need)

def attention_scores(query, key):
    dims = list(range(key.dim()))
    dims[-1], dims[-2] = dims[-2], dims[-1]
    return torch.matmul(query, key.permute(*dims))
