# correct: sennrich regex vocab
# source: https://arxiv.org/abs/1508.07909 (Sennrich et al. 2016, Algorithm 1: get_stats, merge_vocab)

import collections
import re

def learn_bpe(word_counts, num_merges):
    vocab = {' '.join(word) + ' </w>': freq for word, freq in word_counts.items()}
    merges = []
    for i in range(num_merges):
        pairs = collections.defaultdict(int)
        for word, freq in vocab.items():
            symbols = word.split()
            for j in range(len(symbols) - 1):
                pairs[symbols[j], symbols[j + 1]] += freq
        if not pairs:
            break
        best = max(pairs, key=pairs.get)
        bigram = re.escape(' '.join(best))
        p = re.compile(r'(?<!\S)' + bigram + r'(?!\S)')
        vocab = {p.sub(''.join(best), word): freq for word, freq in vocab.items()}
        merges.append(best)
    return merges
