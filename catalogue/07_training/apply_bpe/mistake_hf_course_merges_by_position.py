# mistake: hf course merges by position
# feedback: in the order learned
# source: https://github.com/huggingface/course/issues/608 ('thug': merges applied by position, not in the order learned)

def apply_bpe(word, merges):
    symbols = list(word) + ['</w>']
    known = set(merges)
    changed = True
    while changed:
        changed = False
        for i in range(len(symbols) - 1):
            if (symbols[i], symbols[i + 1]) in known:
                symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
                changed = True
                break
    return symbols
