# correct: regex
# source: own

import re

def apply_bpe(word, merges):
    s = ' '.join(list(word) + ['</w>'])
    for pair in merges:
        s = re.sub(r'(?<!\S)' + re.escape(' '.join(pair)) + r'(?!\S)', ''.join(pair), s)
    return s.split(' ')
