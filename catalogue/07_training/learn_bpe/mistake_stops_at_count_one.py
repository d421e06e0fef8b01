# mistake: stops when the most frequent pair occurs once (a minimum pair frequency of 2)
# feedback: occurs only once
# source: https://github.com/rsennrich/subword-nmt/blob/master/subword_nmt/learn_bpe.py (learn_bpe stops when no pair has frequency >= min_frequency, 2 by default)
# Kept from subword-nmt: the words as symbol tuples sorted by frequency, a tie to the pair that sorts last,
# the regex that merges whole symbols only, and the stop at min_frequency. The exercise merges on
# until no pair is left or num_merges are learned, so a last merge of a pair seen once is missed.

import re

def learn_bpe(word_counts, num_merges, min_frequency=2):
    vocab = sorted(((tuple(word) + ('</w>',), freq) for word, freq in word_counts.items()),
                   key=lambda item: item[1], reverse=True)
    merges = []
    for _ in range(num_merges):
        stats = {}
        for symbols, freq in vocab:
            for pair in zip(symbols, symbols[1:]):
                stats[pair] = stats.get(pair, 0) + freq
        if not stats:
            break
        most_frequent = max(stats, key=lambda pair: (stats[pair], pair))
        if stats[most_frequent] < min_frequency:
            break
        merges.append(most_frequent)
        pattern = re.compile(r'(?<!\S)' + re.escape(' '.join(most_frequent)) + r'(?!\S)')
        vocab = [(tuple(pattern.sub(''.join(most_frequent), ' '.join(symbols)).split(' ')), freq)
                 for symbols, freq in vocab]
    return merges
