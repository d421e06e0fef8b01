# mistake: over others
# feedback: V-1 wrong classes
# source: own

class LabelSmoothingLoss(nn.Module):
    def __init__(self, smoothing=0.1, ignore_index=-100):
        super().__init__()
        self.smoothing, self.ignore_index = smoothing, ignore_index

    def forward(self, logits, target):
        V = logits.size(-1)
        logp = F.log_softmax(logits, -1).reshape(-1, V)
        t = target.reshape(-1)
        keep = t != self.ignore_index
        q = torch.full_like(logp, self.smoothing / (V - 1))
        q.scatter_(1, t.clamp(min=0)[:, None], 1 - self.smoothing)
        return -(q * logp).sum(-1)[keep].mean()
