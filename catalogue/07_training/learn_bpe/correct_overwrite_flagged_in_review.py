# correct: overwrite flagged in review
# source: https://github.com/rohitg00/ai-engineering-from-scratch/pull/47 (review comment on main.py)
# A reviewer flagged `new_vocab[tuple(new_tokens)] = freq` as losing counts when two words
# collapse into one; distinct words never do (a merge keeps the joined text), so it is right.

def learn_bpe(word_counts, num_merges):
    vocab = {tuple(w) + ('</w>',): f for w, f in word_counts.items()}
    merges = []
    for _ in range(num_merges):
        pairs = {}
        for tokens, freq in vocab.items():
            for i in range(len(tokens) - 1):
                pairs[tokens[i], tokens[i + 1]] = pairs.get((tokens[i], tokens[i + 1]), 0) + freq
        if not pairs:
            break
        best = max(pairs, key=pairs.get)
        merges.append(best)
        new_vocab = {}
        for tokens, freq in vocab.items():
            new_tokens, i = [], 0
            while i < len(tokens):
                if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) == best:
                    new_tokens.append(tokens[i] + tokens[i + 1])
                    i += 2
                else:
                    new_tokens.append(tokens[i])
                    i += 1
            new_vocab[tuple(new_tokens)] = freq
        vocab = new_vocab
    return merges
