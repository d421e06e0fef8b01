# mistake: summed
# feedback: summed
# source: own

class LabelSmoothingLoss(nn.Module):
    def __init__(self, smoothing=0.1, ignore_index=-100):
        super().__init__()
        self.smoothing, self.ignore_index = smoothing, ignore_index

    def forward(self, logits, target):
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1), label_smoothing=self.smoothing,
                               ignore_index=self.ignore_index, reduction='sum')
