# mistake: kl sum not mean
# feedback: sum
# source: https://github.com/huggingface/transformers/issues/7546 (not normalised by the tokens)

class LabelSmoothingLoss(nn.Module):
    def __init__(self, smoothing=0.1, ignore_index=-100):
        super().__init__()
        self.smoothing, self.ignore_index = smoothing, ignore_index

    def forward(self, logits, target):
        V = logits.size(-1)
        logp = F.log_softmax(logits, -1).reshape(-1, V)
        target = target.reshape(-1)
        true_dist = torch.full_like(logp, self.smoothing / V)
        true_dist.scatter_(1, target.clamp(min=0)[:, None], 1 - self.smoothing + self.smoothing / V)
        true_dist[target == self.ignore_index] = 0
        return -(true_dist * logp).sum()
