# mistake: string replace
# feedback: string replace
# source: own
# The classic bug of merging on joined strings without symbol boundaries.

import re, collections

def learn_bpe(word_counts, num_merges):
    vocab = {' '.join(list(w) + ['</w>']): c for w, c in word_counts.items()}
    merges = []
    for _ in range(num_merges):
        pairs = collections.defaultdict(int)
        for word, c in vocab.items():
            s = word.split()
            for i in range(len(s) - 1):
                pairs[s[i], s[i + 1]] += c
        if not pairs:
            break
        best = max(pairs, key=pairs.get)
        merges.append(best)
        p = re.compile(r'(?<!\S)' + re.escape(' '.join(best)) + r'(?!\S)')
        vocab = {w.replace(' '.join(best), ''.join(best)): c for w, c in vocab.items()}
    return merges
