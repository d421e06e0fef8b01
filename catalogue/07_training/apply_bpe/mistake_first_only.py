# mistake: first only
# feedback: first occurrence
# source: own

def apply_bpe(word, merges):
    symbols = list(word) + ['</w>']
    for a, b in merges:
        for i in range(len(symbols) - 1):
            if symbols[i] == a and symbols[i + 1] == b:
                symbols[i:i + 2] = [a + b]
                break
    return symbols
