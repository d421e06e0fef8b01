# mistake: str replace
# feedback: across symbol boundaries
# source: own
# The student's answer from the course v3 issue: merging with str.replace on the joined symbols.

def apply_bpe(word, merges):
    text = ' '.join(list(word) + ['</w>'])
    for a, b in merges:
        text = text.replace(a + ' ' + b, a + b)
    return text.split()
