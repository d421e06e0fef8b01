# mistake: no end marker
# feedback: '</w>'
# source: own

from collections import Counter

def _merge(symbols, pair):
    out = []
    i = 0
    while i < len(symbols):
        if tuple(symbols[i:i + 2]) == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out

def learn_bpe(word_counts, num_merges):
    words = [(list(w), c) for w, c in word_counts.items()]
    merges = []
    while len(merges) < num_merges:
        pairs = Counter()
        for s, c in words:
            for p in zip(s, s[1:]):
                pairs[p] += c
        if not pairs:
            break
        best = pairs.most_common(1)[0][0]
        merges.append(best)
        words = [(_merge(s, best), c) for s, c in words]
    return merges
