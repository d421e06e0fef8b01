# mistake: builtin
# feedback: built-in
# source: own

def softmax(x, dim=-1):
    return F.softmax(x, dim=dim)
