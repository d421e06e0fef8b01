# correct: subword nmt lowest rank first
# source: https://github.com/rsennrich/subword-nmt (subword_nmt/apply_bpe.py, encode)

def apply_bpe(word, merges):
    ranks = {pair: i for i, pair in enumerate(merges)}
    word = list(word) + ['</w>']
    while len(word) > 1:
        pairs = set(zip(word, word[1:]))
        bigram = min(pairs, key=lambda p: ranks.get(p, float('inf')))
        if bigram not in ranks:
            break
        first, second = bigram
        new_word, i = [], 0
        while i < len(word):
            try:
                j = word.index(first, i)
            except ValueError:
                new_word.extend(word[i:])
                break
            new_word.extend(word[i:j])
            i = j
            if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                new_word.append(first + second)
                i += 2
            else:
                new_word.append(word[i])
                i += 1
        word = new_word
    return word
