# correct: minbpe lists
# source: https://github.com/karpathy/minbpe (minbpe/base.py, get_stats and merge)

def _stats(ids, counts, weight):
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + weight
    return counts

def _merge(ids, pair, new):
    out, i = [], 0
    while i < len(ids):
        if ids[i] == pair[0] and i < len(ids) - 1 and ids[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out

def learn_bpe(word_counts, num_merges):
    words = {w: list(w) + ['</w>'] for w in word_counts}
    merges = []
    for _ in range(num_merges):
        counts = {}
        for w, ids in words.items():
            _stats(ids, counts, word_counts[w])
        if not counts:
            break
        pair = max(counts, key=counts.get)
        merges.append(pair)
        words = {w: _merge(ids, pair, pair[0] + pair[1]) for w, ids in words.items()}
    return merges
