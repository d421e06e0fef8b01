# correct: distribution
# source: own

class LabelSmoothingLoss(nn.Module):
    def __init__(self, smoothing=0.1, ignore_index=-100):
        super().__init__()
        self.smoothing, self.ignore_index = smoothing, ignore_index

    def forward(self, logits, target):
        V = logits.size(-1)
        logp = torch.log_softmax(logits.reshape(-1, V), -1)
        t = target.reshape(-1)
        keep = t != self.ignore_index
        q = torch.full_like(logp, self.smoothing / V)
        q[keep, t[keep]] += 1 - self.smoothing
        return -(q * logp).sum(-1)[keep].sum() / keep.sum()
