# correct: fairseq style uniform over all
# source: https://github.com/facebookresearch/fairseq (criterions/label_smoothed_cross_entropy.py)

class LabelSmoothingLoss(nn.Module):
    def __init__(self, smoothing=0.1, ignore_index=-100):
        super().__init__()
        self.smoothing, self.ignore_index = smoothing, ignore_index

    def forward(self, logits, target):
        lprobs = F.log_softmax(logits, dim=-1).reshape(-1, logits.size(-1))
        target = target.reshape(-1)
        keep = target != self.ignore_index
        lprobs, target = lprobs[keep], target[keep]
        nll = -lprobs.gather(1, target[:, None]).squeeze(1)
        smooth = -lprobs.mean(-1)
        return ((1 - self.smoothing) * nll + self.smoothing * smooth).mean()
