# correct: gather
# source: own

class LabelSmoothingLoss(nn.Module):
    def __init__(self, smoothing=0.1, ignore_index=-100):
        super().__init__()
        self.smoothing, self.ignore_index = smoothing, ignore_index

    def forward(self, logits, target):
        logp = F.log_softmax(logits, -1).reshape(-1, logits.size(-1))
        t = target.reshape(-1)
        keep = t != self.ignore_index
        nll = -logp.gather(1, t.masked_fill(~keep, 0)[:, None]).squeeze(1)
        return ((1 - self.smoothing) * nll - self.smoothing * logp.mean(-1))[keep].mean()
