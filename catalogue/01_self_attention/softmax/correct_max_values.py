# correct: max values
# source: own

def softmax(x, dim=-1):
    e = torch.exp(x - torch.max(x, dim=dim, keepdim=True)[0])
    return e / torch.sum(e, dim=dim, keepdim=True)
