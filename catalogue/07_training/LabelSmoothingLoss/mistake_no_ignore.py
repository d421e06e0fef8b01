# mistake: no ignore
# feedback: not ignored
# source: own

class LabelSmoothingLoss(nn.Module):
    def __init__(self, smoothing=0.1, ignore_index=-100):
        super().__init__()
        self.smoothing, self.ignore_index = smoothing, ignore_index

    def forward(self, logits, target):
        logp = F.log_softmax(logits, -1).reshape(-1, logits.size(-1))
        t = target.reshape(-1).clamp(min=0)
        nll = -logp.gather(1, t[:, None]).squeeze(1)
        return ((1 - self.smoothing) * nll - self.smoothing * logp.mean(-1)).mean()
