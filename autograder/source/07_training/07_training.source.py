# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · Training a translator: teacher forcing on Multi30k
#
# Notebook 06 built the model; here we teach it German → English. Part A has the
# exercises: the pieces of a training loop (teacher forcing, the learning-rate schedule,
# label smoothing, one epoch of training, greedy decoding and beam search) and byte-pair
# encoding, each tested on tiny synthetic data. Part B trains the course's `Transformer` on **Multi30k** (Elliott et al., 2016,
# "Multi30K: Multilingual English-German Image Descriptions"; 29,000 image captions with
# their translations) and measures it with BLEU.
#
# Part B picks its size by itself: the full configuration on a GPU (with bf16 mixed
# precision), a small one on a CPU (10 minutes on 2 cores). Set the environment variable
# `COURSE_TRAIN_CONFIG` to `gpu`, `cpu` or `tiny` to choose; on an older GPU such as
# Colab's free T4, read section 9 first. The grader skips Part B (grading never trains).
#
# **Exercises:** `shift_right`, `make_teacher_forcing_batch`, `noam_lr`,
# `LabelSmoothingLoss`, `train_epoch`, `greedy_decode`, `beam_search`, `learn_bpe`,
# `apply_bpe`. `course_blocks.py` holds the
# reference code of notebooks 01-06 (`Transformer` included); `multi30k.py` downloads and
# tokenises the data.

# %% jupyter={"source_hidden": true}
# Setup. In Google Colab this installs what Colab lacks and fetches the files this
# assignment provides; anywhere else it only shortens the tracebacks of errors in your code.
import sys

if "google.colab" in sys.modules:
    import importlib.util
    import subprocess
    import urllib.request

    ASSIGNMENT_URL = (
        "https://raw.githubusercontent.com/transformer-course/transformer-course/main/course/"
        "07_training"
    )
    PROVIDED = ["course_blocks.py", "multi30k.py", "my_modules.py"]  # reference code of 01-06; helpers
    missing = [p for p in ("torch", "matplotlib", "seaborn", "sacrebleu", "sentencepiece", "tqdm")
               if importlib.util.find_spec(p) is None]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)
    for name in PROVIDED:
        urllib.request.urlretrieve(f"{ASSIGNMENT_URL}/{name}", name)

try:  # An error inside a module (an unwritten exercise, a shape mistake): show the test and your code, not PyTorch's frames between.
    def _short_traceback(shell, etype, value, tb, tb_offset=None):
        import types

        frames = []
        while tb is not None:
            if not tb.tb_frame.f_code.co_filename.replace("\\", "/").endswith("torch/nn/modules/module.py"):
                frames.append(tb)
            tb = tb.tb_next
        for frame in reversed(frames):
            tb = types.TracebackType(tb, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
        shell.showtraceback((etype, value, tb), running_compiled_code=True)

    get_ipython().set_custom_exc((Exception,), _short_traceback)
except NameError:  # not in IPython or Jupyter
    pass


# %%
import contextlib
import itertools
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns
import torch
import torch.nn.functional as F
from course_blocks import Transformer, make_decoder_mask, make_padding_mask
from torch import nn
from tqdm.auto import tqdm

torch.manual_seed(0)
sns.set_theme(style="whitegrid", palette="colorblind")

# %% [markdown]
# # Part A: the training loop, piece by piece
#
# ## 1. The task, in tensors
#
# Each training example is a German sentence and its English translation, as token ids.
# The source ends with `<eos>`; the target is wrapped as `<bos> y_1 … y_n <eos>`, and a
# batch pads every row to the same length with `<pad>`. The ids of these special tokens:

# %%
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
words = ["<pad>", "<unk>", "<bos>", "<eos>", "a", "dog", "runs", "two", "men", "talk"]
tgt = torch.tensor([[2, 4, 5, 6, 3, 0],    # <bos> a dog runs <eos> <pad>
                    [2, 7, 8, 9, 3, 0]])   # <bos> two men talk <eos> <pad>
print(tgt.shape, "= (B, T + 1)")

# %% [markdown]
# ## 2. Teacher forcing
#
# The decoder predicts one token at a time, each from the tokens before it. At inference
# time "the tokens before" are its own guesses; in training we feed it the **correct**
# previous tokens instead (teacher forcing), so all positions can be trained at once in
# one parallel pass: the causal mask (notebook 04) makes sure position $t$ sees only
# positions $\le t$.
#
# So the decoder input is the target **shifted right** (starting with `<bos>`), and the
# labels are the target **shifted left**: at each position, the label is the *next* token.
#
# | position | 0 | 1 | 2 | 3 | 4 |
# |---|---|---|---|---|---|
# | decoder input | `<bos>` | a | dog | runs | `<eos>` |
# | label (next token) | a | dog | runs | `<eos>` | `<pad>` |
#
# The label `<pad>` is ignored by the loss. Nothing is ever predicted *from* `<eos>` that
# counts, and `<bos>` is never a label.
#
# **Exercise 1.** `shift_right(tgt, bos_id)`: prepend `bos_id` and drop the last token, so
# the output has the same shape as the input.

# %% [markdown]
# **Stuck on `shift_right`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.1 ("the output embeddings are offset by one position").
#
# <details><summary>Hint 1: a nudge</summary>
#
# The decoder should see, at step t, only the tokens before t.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Put `bos_id` in front and drop the last token, so the length stays `T`.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Two pieces joined along the time axis with `torch.cat(..., dim=1)`: a `(B, 1)` column of `bos_id` with `tgt`'s dtype and device (look up `torch.full_like` or `Tensor.new_full`), and `tgt` without its last column. The result has exactly `tgt`'s shape.
#
# </details>
#
# **Check yourself:** For `tgt = [[7, 8, 9]]` and `bos_id = 1`, what is the result?
#
# <details><summary>Answer</summary>
#
# `[[1, 7, 8]]`.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "shift_right", "locked": false, "schema_version": 3, "solution": true}
def shift_right(tgt: torch.Tensor, bos_id: int) -> torch.Tensor:
    """The decoder input for teacher forcing: ``bos_id`` prepended, the last token dropped.

    Args:
        tgt: ``(B, T)`` int64 target tokens.
        bos_id: the beginning-of-sentence id.

    Returns:
        ``(B, T)`` int64: ``out[:, 0] == bos_id`` and ``out[:, 1:] == tgt[:, :-1]``.
    """
    ### BEGIN SOLUTION
    bos = torch.full_like(tgt[:, :1], bos_id)  # (B, 1)
    return torch.cat([bos, tgt[:, :-1]], dim=1)  # (B, T)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_shift_right", "locked": true, "points": 1, "schema_version": 3, "solution": false}
y = torch.tensor([[4, 5, 6, 3], [7, 8, 3, 0]])  # a dog runs <eos> | two men <eos> <pad>
shifted = shift_right(y, BOS_ID)
assert shifted.shape == y.shape, f"expected the input's shape {tuple(y.shape)}, got {tuple(shifted.shape)}"
assert shifted.tolist() == [[2, 4, 5, 6], [2, 7, 8, 3]], f"expected <bos> then all but the last token, got {shifted.tolist()}"
print("shift_right: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_shift_right_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): other batches, lengths and bos ids.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb07 as _checks

_checks.check_shift_right(globals())
### END HIDDEN TESTS

# %% [markdown]
# When the batch already holds `<bos> y <eos>` (our loader builds it that way), no new
# token is needed: the decoder input and the labels are two slices of the same rows, one
# position apart, of equal length.
#
# **Exercise 2.** `make_teacher_forcing_batch(tgt, pad_id)` returns `(decoder_input, labels)`.

# %% [markdown]
# **Stuck on `make_teacher_forcing_batch`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.1 and §5 (training with the true previous tokens).
#
# <details><summary>Hint 1: a nudge</summary>
#
# One padded row holds both what the decoder reads and what it must predict.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Put the two rows of section 2's table under the full row `<bos> y_1 .. y_n <eos> <pad>..`: each is that row with one column missing at one end. Which end, for each? Ask which token the decoder must read first, and which token is never a label.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Both are slices of `tgt` along dim 1, each one position shorter; nothing needs copying or padding. Check on the example above: the first label is the second input.
#
# </details>
#
# **Check yourself:** At the position where the decoder input is `<eos>` or padding, what is the label, and why is that fine?
#
# <details><summary>Answer</summary>
#
# Padding, which the loss ignores (`ignore_index=pad_id`), so those positions cost nothing.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "make_teacher_forcing_batch", "locked": false, "schema_version": 3, "solution": true}
def make_teacher_forcing_batch(tgt: torch.Tensor, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split ``<bos> y_1 .. y_n <eos> <pad>..`` rows into decoder input and labels.

    Args:
        tgt: ``(B, T + 1)`` int64.
        pad_id: the padding id (labels keep it; the loss ignores it).

    Returns:
        ``(decoder_input, labels)``, both ``(B, T)``: at every position, the decoder sees the
        tokens so far and its label is the token that comes next.
    """
    ### BEGIN SOLUTION
    return tgt[:, :-1], tgt[:, 1:]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_make_teacher_forcing_batch", "locked": true, "points": 1, "schema_version": 3, "solution": false}
decoder_input, labels = make_teacher_forcing_batch(tgt, PAD_ID)
assert decoder_input.shape == labels.shape == (2, 5), "both should be (B, T) = (2, 5)"
print(" decoder input:", [words[i] for i in decoder_input[0]])
print("        labels:", [words[i] for i in labels[0]])
assert torch.equal(decoder_input[:, 1:], labels[:, :-1]), "each label should be the NEXT decoder input"
assert (decoder_input[:, 0] == BOS_ID).all(), "the decoder input starts with <bos>"
print("make_teacher_forcing_batch: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_make_teacher_forcing_batch_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): other batches; names swapped or unshifted outputs.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb07 as _checks

_checks.check_make_teacher_forcing_batch(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 3. The learning-rate schedule
#
# The paper trains with Adam ($\beta_1 = 0.9$, $\beta_2 = 0.98$, $\epsilon = 10^{-9}$) and a
# rate that rises linearly during `warmup_steps` and then decays with the inverse square
# root of the step (section 5.3, equation 3):
#
# $$lrate = d_{model}^{-0.5} \cdot \min(step^{-0.5},\; step \cdot warmup\_steps^{-1.5})$$
#
# The two terms are equal at `step == warmup_steps`, where the rate peaks. The warm-up
# matters for post-LN Transformers: early gradients are large and erratic, and a full-size
# step at step 1 can wreck the model.
#
# `step` counts from **1**. `torch.optim.lr_scheduler.LambdaLR` calls its function with
# 0, 1, 2, … (the number of `scheduler.step()` calls so far), so pass it `step + 1`; at
# step 0 the formula divides by zero.
#
# **Exercise 3.** `noam_lr(step, d_model, warmup_steps)` returns the rate as a float.

# %% [markdown]
# **Stuck on `noam_lr`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §5.3, Eq. (3).
#
# <details><summary>Hint 1: a nudge</summary>
#
# Two regimes: a linear warm-up, then a slow decay. The formula takes the smaller of the two.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Eq. (3) term by term: the warm-up term grows in proportion to `step` (scaled by $\text{warmup\_steps}^{-1.5}$), the decay term is $\text{step}^{-0.5}$; Python's `min` picks the smaller, and $d_{\text{model}}^{-0.5}$ scales the result (`**` takes a power). Steps count from 1 (step 0 would divide by zero), so reject `step < 1` with a `ValueError`.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Python's `min` and `**` are all it takes (`x ** -0.5` is $1/\sqrt{x}$), after a guard that raises `ValueError` for `step < 1`. Try it at `step == warmup_steps`: both terms equal `warmup_steps ** -0.5` there.
#
# </details>
#
# **Check yourself:** At which step is the rate highest?
#
# <details><summary>Answer</summary>
#
# At `step == warmup_steps`, where the two terms are equal.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "noam_lr", "locked": false, "schema_version": 3, "solution": true}
def noam_lr(step: int, d_model: int, warmup_steps: int) -> float:
    """The learning rate at ``step`` (counted from 1), Vaswani et al. (2017) eq. (3).

    Returns:
        ``d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)``.

    Raises:
        ValueError: if ``step < 1`` (step 0 would divide by zero; ``LambdaLR`` counts from 0,
            so a scheduler passes ``step + 1``).
    """
    ### BEGIN SOLUTION
    if step < 1:
        raise ValueError(f"step counts from 1, got {step}")
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_noam_lr", "locked": true, "points": 1, "schema_version": 3, "solution": false}
steps = list(range(50, 20001, 50))  # every 50th step is enough to draw the curves
rates = [noam_lr(s, 512, 4000) for s in steps]
peak = steps[max(range(len(rates)), key=rates.__getitem__)]
assert peak == 4000, f"the rate should peak at step == warmup_steps = 4000, peaks near {peak}"
around = [noam_lr(s, 512, 4000) for s in (3999, 4000, 4001)]
assert around[0] < around[1] > around[2], "the rate should peak exactly at step == warmup_steps, not one off"
assert math.isclose(around[1], 512**-0.5 * 4000**-0.5), "the peak value is d_model^-0.5 * warmup_steps^-0.5"
assert math.isclose(noam_lr(2, 512, 4000) / noam_lr(1, 512, 4000), 2.0), "during warm-up the rate grows linearly with the step"
fig, ax = plt.subplots(figsize=(6, 3))
for d_model, warmup in [(512, 4000), (512, 8000), (256, 4000)]:
    curve = rates if (d_model, warmup) == (512, 4000) else [noam_lr(s, d_model, warmup) for s in steps]
    ax.plot(steps, curve, label=f"d_model={d_model}, warmup={warmup}")
ax.set(xlabel="step", ylabel="learning rate", title="Warm-up, then 1/√step decay")
ax.legend()
plt.tight_layout()
plt.show()
print("Notice: larger models get smaller rates; a longer warm-up gives a lower, later peak.")
print("noam_lr: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_noam_lr_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): several d_model / warmup_steps, steps around the peak.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb07 as _checks

_checks.check_noam_lr(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 4. Label smoothing
#
# Cross-entropy with one-hot targets rewards the model for pushing the right token's
# probability towards 1, which it can never reach: logits grow without bound and the
# model becomes over-confident. **Label smoothing** (section 5.4, $\epsilon_{ls} = 0.1$)
# mixes the one-hot target with a uniform distribution over the $V$ classes:
#
# $$q = (1 - \epsilon)\,\mathrm{onehot}(y) + \frac{\epsilon}{V}, \qquad
#   \mathcal{L} = -\sum_v q_v \log p_v = (1-\epsilon)\,(-\log p_y) + \epsilon \cdot \frac{1}{V}\sum_v (-\log p_v).$$
#
# The paper notes it "hurts perplexity, as the model learns to be more unsure, but improves
# accuracy and BLEU". Positions whose label is `<pad>` are ignored: the loss is the mean over
# the real labels only. This is exactly what `F.cross_entropy(logits, target,
# label_smoothing=eps, ignore_index=pad_id)` computes; write it by hand to see the parts.
#
# **Which convention.** Implementations smooth in two ways, and this exercise asks for the one
# above: every one of the $V$ classes gets $\epsilon / V$, `<pad>` and the correct token
# included, so the correct token's target is $1 - \epsilon + \epsilon / V$. The Annotated
# Transformer (Harvard NLP's walk-through of the paper) does it differently: its `<pad>` class
# gets no mass, $\epsilon$ is shared by the other $V - 2$ wrong classes, and the correct token's
# target is exactly $1 - \epsilon$; it also measures the KL divergence, which differs from
# the cross-entropy by the target's entropy (a constant: the same gradients, a different value).
# Both are reasonable: no label is ever `<pad>`, so the $\epsilon / V$ this convention puts on it
# is spent on a class the model never needs, which with $V$ in the thousands is very little. But
# the two give different losses: if you learnt the other one, note the difference before you start.
#
# **Exercise 4.** `LabelSmoothingLoss(smoothing, ignore_index)`: its forward takes logits
# `(N, V)` or `(B, T, V)` and targets `(N,)` or `(B, T)` and returns the mean loss over
# the targets that are not `ignore_index`. Use `F.log_softmax` (numerically stable).

# %% [markdown]
# **Stuck on `LabelSmoothingLoss`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §5.4 (label smoothing, $\epsilon_{ls} = 0.1$).
#
# <details><summary>Hint 1: a nudge</summary>
#
# The target distribution puts `1 - smoothing` on the right token and spreads `smoothing` uniformly over all V classes.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Per target: `(1 - s) * (-log p[y]) + s * mean over classes of (-log p)`; use `log_softmax` on the logits; average over the targets that are not `ignore_index`. It must equal `F.cross_entropy(..., label_smoothing=s, ignore_index=...)`.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Flatten to `(N, V)` log-probabilities and `(N,)` targets. `Tensor.gather(1, index)` picks each row's $\log p_y$, but a target equal to `ignore_index` (`-100` by default) is not a valid index there: first mark which targets to keep (those that are not `ignore_index`), replace the ignored ones by any valid class (`masked_fill`), gather, and average the per-target losses over the kept rows only.
#
# </details>
#
# **Check yourself:** Why divide by the number of kept targets rather than by `B * T`?
#
# <details><summary>Answer</summary>
#
# Padding positions are not targets; counting them would make the loss depend on how much padding a batch has.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "LabelSmoothingLoss", "locked": false, "schema_version": 3, "solution": true}
class LabelSmoothingLoss(nn.Module):
    """Cross-entropy against label-smoothed targets (Vaswani et al., 2017, section 5.4).

    Equal to ``F.cross_entropy(logits, target, label_smoothing=smoothing, ignore_index=ignore_index)``.

    Args:
        smoothing: the mass ``epsilon`` spread uniformly over all ``V`` classes, in [0, 1).
        ignore_index: targets with this id (padding) do not count.

    Shape:
        forward(logits ``(N, V)`` or ``(B, T, V)``, target ``(N,)`` or ``(B, T)`` int64) -> scalar.
    """

    def __init__(self, smoothing: float = 0.1, ignore_index: int = -100):
        super().__init__()
        self.smoothing = smoothing
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        log_probs = F.log_softmax(logits, dim=-1).reshape(-1, logits.size(-1))  # (N, V)
        target = target.reshape(-1)  # (N,)
        keep = target != self.ignore_index
        nll = -log_probs.gather(1, target.masked_fill(~keep, 0)[:, None]).squeeze(1)  # -log p_y
        uniform = -log_probs.mean(dim=-1)  # (1/V) sum_v -log p_v
        loss = (1 - self.smoothing) * nll + self.smoothing * uniform
        return loss[keep].mean()
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_LabelSmoothingLoss", "locked": true, "points": 1, "schema_version": 3, "solution": false}
logits = torch.randn(2, 5, 10)
target = torch.tensor([[4, 5, 6, 3, 0], [7, 8, 3, 0, 0]])
ours = LabelSmoothingLoss(0.1, ignore_index=PAD_ID)(logits, target)
builtin = F.cross_entropy(logits.reshape(-1, 10), target.reshape(-1), label_smoothing=0.1, ignore_index=PAD_ID)
assert ours.dim() == 0, f"the loss should be a scalar, got shape {tuple(ours.shape)}"
assert torch.allclose(ours, builtin, atol=1e-5), f"got {ours.item():.5f}, F.cross_entropy gives {builtin.item():.5f}"
print("LabelSmoothingLoss: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_LabelSmoothingLoss_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): several smoothings, ignore ids and shapes; values and
# gradients compared with F.cross_entropy.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb07 as _checks

_checks.check_LabelSmoothingLoss(globals())
### END HIDDEN TESTS

# %% [markdown]
# What the smoothed target looks like, and why the loss no longer wants certainty: with
# $\epsilon = 0.1$ the loss is smallest when the model gives the right token about 0.9,
# not 1.

# %%
vocab = 10
confidence = torch.linspace(0.05, 0.999, 200)
losses = {}
for eps in (0.0, 0.1, 0.3):
    loss_fn = LabelSmoothingLoss(eps)
    rest = (1 - confidence) / (vocab - 1)  # the other tokens share what is left
    probs = torch.cat([confidence[:, None], rest[:, None].expand(-1, vocab - 1)], dim=1)
    losses[eps] = [loss_fn(p.log()[None], torch.tensor([0])).item() for p in probs]
fig, ax = plt.subplots(figsize=(6, 3))
for eps, values in losses.items():
    ax.plot(confidence, values, label=f"ε = {eps}")
ax.set(xlabel="probability given to the correct token", ylabel="loss", ylim=(0, 3),
       title="Label smoothing penalises over-confidence")
ax.legend()
plt.tight_layout()
plt.show()
print("Notice: with ε > 0 each curve has a minimum below 1; with ε = 0 the loss keeps falling to 0.")

# %% [markdown]
# ## 5. One epoch of training
#
# The loop every PyTorch training uses, for each batch `(src, tgt)` of the loader:
#
# 1. move the batch to `device`;
# 2. split the target with `make_teacher_forcing_batch`;
# 3. `logits = model(src, decoder_input)` (the model builds its masks from `model.pad_id`);
# 4. `loss = loss_fn(logits, labels)`;
# 5. `optimizer.zero_grad()`, `loss.backward()`, then, optionally, clip the gradient norm
#    to 1.0 (`nn.utils.clip_grad_norm_`: not in the paper, a common safeguard so that one
#    bad batch cannot blow up the weights; our solution does it), `optimizer.step()`, then
#    `scheduler.step()` (the schedule moves once per **batch**).
#
# Start with `model.train()` (dropout on). Return the mean loss **per target token**:
# batches hold different numbers of real labels, so weight each batch's mean loss by its
# count of non-pad labels. On a GPU whose tensor cores take bfloat16 (compute capability
# 8.0 or higher: an A100, an L4, an H100, an RTX 30-series card or newer), wrap the forward
# pass in `torch.autocast("cuda", dtype=torch.bfloat16)`: mixed precision, matrix products
# in bf16, about twice as fast, and bf16 keeps float32's range, so no loss scaling is needed.
# `torch.cuda.is_bf16_supported(including_emulation=False)` tells you. An older GPU (Colab's
# free T4 is 7.5, a V100 7.0) has no bf16 units: PyTorch would emulate bf16 there, slower
# than plain float32, so stay in float32; on a CPU, no autocast either (section 9 says why).
# Part B checks which precision your loop trained in and says so if it differs from the
# one this machine should use.
#
# **Exercise 5.** Write `train_epoch`.

# %% [markdown]
# **Stuck on `train_epoch`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §5 (training), §5.3 (schedule).
#
# <details><summary>Hint 1: a nudge</summary>
#
# The standard PyTorch loop, with the teacher-forcing split in the middle.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# For each batch: move to `device`, split with `make_teacher_forcing_batch`, compute logits and loss, `zero_grad`, `backward`, (optionally) clip the gradient norm, `optimizer.step()`, then `scheduler.step()`. Return the loss averaged per target token over the epoch.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Keep two running Python numbers, not tensors: the sum of each batch's loss times its number of real labels, and the sum of those numbers. `loss.item()` gives a float; the labels that are not `model.pad_id`, counted with `.sum()` and turned into an `int`, give the tokens. The return value is their ratio, a `float`.
#
# </details>
#
# **Check yourself:** Why weight each batch's loss by its number of tokens?
#
# <details><summary>Answer</summary>
#
# Batches hold different numbers of real tokens; the per-token mean of the epoch is then independent of how the data was cut into batches.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "train_epoch", "locked": false, "schema_version": 3, "solution": true}
def train_epoch(model, loader, optimizer, scheduler, loss_fn, device) -> float:
    """One pass of teacher-forced training over ``loader``.

    Args:
        model: ``model(src, decoder_input)`` -> logits ``(B, T, V)``; has ``pad_id``.
        loader: yields ``(src (B, S), tgt (B, T + 1))`` int64 batches.
        optimizer: stepped once per batch; scheduler: stepped once per batch (or None).
        loss_fn: mean loss over non-pad labels, e.g. ``LabelSmoothingLoss``.
        device: where the batches go (``torch.device`` or str).

    Returns:
        The mean loss per target token (non-pad labels) over the epoch, as a float.
    """
    ### BEGIN SOLUTION
    model.train()
    device = torch.device(device)
    total_loss, total_tokens = 0.0, 0
    for src, tgt in loader:
        src, tgt = src.to(device), tgt.to(device)
        decoder_input, labels = make_teacher_forcing_batch(tgt, model.pad_id)
        # bf16 mixed precision on a GPU with bf16 tensor cores; float32 on an older GPU; on a CPU,
        # whatever autocast the caller has set holds.
        amp = (torch.autocast("cuda", dtype=torch.bfloat16, enabled=torch.cuda.is_bf16_supported(False))
               if device.type == "cuda" else contextlib.nullcontext())
        with amp:
            logits = model(src, decoder_input)  # (B, T, V)
        loss = loss_fn(logits.float(), labels)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        tokens = int((labels != model.pad_id).sum())
        total_loss += loss.item() * tokens
        total_tokens += tokens
    return total_loss / max(total_tokens, 1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_train_epoch", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def copy_task_batches(num_batches: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Source: 6 random tokens; target: the same tokens, wrapped in <bos> .. <eos>."""
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(num_batches):
        src = torch.randint(4, 12, (32, 6), generator=gen)
        tgt = torch.cat([torch.full((32, 1), BOS_ID), src, torch.full((32, 1), EOS_ID)], dim=1)
        batches.append((torch.cat([src, torch.full((32, 1), EOS_ID)], dim=1), tgt))
    return batches


def flat_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Plain cross-entropy over (B, T, V) logits, padding ignored (independent of Exercise 4)."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=PAD_ID)


def _test_train_epoch():
    torch.manual_seed(0)
    model = Transformer(12, 12, d_model=32, num_heads=4, num_layers=1, d_ff=64, dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = flat_cross_entropy
    first = train_epoch(model, copy_task_batches(1), optimizer, None, loss_fn, "cpu")
    assert isinstance(first, float), f"train_epoch should return a float, got {type(first).__name__}"
    assert 1.5 < first < 3.5, f"the first batch's loss should be near ln(12) = 2.5, got {first:.3f}"
    for epoch in range(3):
        last = train_epoch(model, copy_task_batches(60, seed=epoch + 1), optimizer, None, loss_fn, "cpu")
    assert last < 0.2, f"copying 6 tokens should be learnt in 180 steps (loss < 0.2), got {last:.3f}"
    return model


### BEGIN HIDDEN TESTS
from course_reference.checks import isolate as _isolate
from course_reference.checks import nb07 as _checks

_test_train_epoch = _isolate(globals(), _test_train_epoch, **_checks.upstream("make_teacher_forcing_batch"))
### END HIDDEN TESTS
start = time.perf_counter()
copy_model = _test_train_epoch()
print(f"train_epoch: visible tests passed (copy task learnt in {time.perf_counter() - start:.1f} s)")

# %% nbgrader={"grade": true, "grade_id": "test_train_epoch_hidden", "locked": true, "points": 3, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): a recording model and optimizer check the decoder
# input, the mode, one optimizer/scheduler step per batch, zeroed gradients, and the
# token-weighted mean loss. Uses the reference make_teacher_forcing_batch.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb07 as _checks

_checks.check_train_epoch(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Greedy decoding
#
# At inference there is no target to feed: the decoder consumes its own output. Greedy
# decoding encodes the source **once**, starts every row with `<bos>`, and repeats:
# decode the tokens so far (with the causal mask), take the logits of the **last**
# position, append their argmax. A row is finished when it has produced `<eos>`; from then
# on it gets `model.pad_id`. Stop when every row is finished, or when the output holds
# `max_len` tokens (`<bos>` included).
#
# Wrap it in `torch.no_grad()` (no gradients needed) and call `model.eval()` before
# decoding (no dropout). Greedy decoding is simple and fast; section 7 keeps the $k$ best
# partial translations instead (beam search).
#
# **Exercise 6.** Write `greedy_decode(model, src, max_len, bos_id, eos_id)`. Use
# `model.encode`, `model.decode`, `model.generator` and the masks of notebook 04.

# %% [markdown]
# **Stuck on `greedy_decode`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §6.1 (the paper uses beam search; greedy is its width-1 case).
#
# <details><summary>Hint 1: a nudge</summary>
#
# Encode once, then grow the output one token at a time.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Start with a column of `bos_id`; at each step decode the whole prefix with the causal mask, take the argmax of the last position's logits and append it. Rows that produced `eos_id` get padding afterwards; stop when all rows are done or at `max_len`.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# The pieces: `model.encode` with the source's padding mask (notebook 04's `make_padding_mask`); in the loop, `model.decode` with the prefix's padding-and-causal mask (`make_decoder_mask`), the states of the last position `[:, -1]` (shape `(B, D)`), `model.generator` and `argmax(-1)`; a bool `finished` of shape `(B,)`, `masked_fill` for rows already finished, and `torch.cat` to append the new `(B, 1)` column.
#
# </details>
#
# **Check yourself:** Why is `memory` computed once, outside the loop?
#
# <details><summary>Answer</summary>
#
# The source does not change while decoding; re-encoding it at every step would give the same result at much greater cost.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "greedy_decode", "locked": false, "schema_version": 3, "solution": true}
@torch.no_grad()
def greedy_decode(model, src: torch.Tensor, max_len: int, bos_id: int, eos_id: int) -> torch.Tensor:
    """Translate ``src`` by taking the most likely next token at each step.

    Args:
        model: a ``Transformer`` in eval mode.
        src: ``(B, S)`` int64 source tokens, padded with ``model.pad_id``.
        max_len: the most tokens per output row, ``<bos>`` included.
        bos_id, eos_id: begin- and end-of-sentence ids.

    Returns:
        ``(B, L)`` int64, ``L <= max_len``: column 0 is ``bos_id``; positions after a row's
        ``eos_id`` hold ``model.pad_id``; stops early once every row has its ``eos_id``.
    """
    ### BEGIN SOLUTION
    src_mask = make_padding_mask(src, model.pad_id)  # (B, 1, 1, S)
    memory = model.encode(src, src_mask)  # (B, S, D), once
    out = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    while out.size(1) < max_len and not finished.all():
        states = model.decode(out, memory, src_mask, make_decoder_mask(out, model.pad_id))  # (B, t, D)
        next_token = model.generator(states[:, -1]).argmax(dim=-1)  # (B,)
        next_token = next_token.masked_fill(finished, model.pad_id)
        out = torch.cat([out, next_token[:, None]], dim=1)
        finished |= next_token == eos_id
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_greedy_decode", "locked": true, "points": 1, "schema_version": 3, "solution": false}
### BEGIN HIDDEN TESTS
from course_reference.checks import nb07 as _checks

copy_model = _checks.copy_model(globals())  # trained with the reference train_epoch: graded on its own
### END HIDDEN TESTS
copy_model.eval()
src = torch.tensor([[5, 9, 7, 4, 11, 6, EOS_ID], [8, 8, 10, 5, 4, 7, EOS_ID]])
out = greedy_decode(copy_model, src, max_len=12, bos_id=BOS_ID, eos_id=EOS_ID)
print("source:", src[0].tolist(), "\noutput:", out[0].tolist())
assert out.dim() == 2 and out.size(0) == 2 and out.size(1) <= 12, f"expected (B, <= max_len), got {tuple(out.shape)}"
assert (out[:, 0] == BOS_ID).all(), "column 0 should be bos_id"
assert out[:, 1:8].tolist() == src.tolist(), "the copy model should reproduce the source, <eos> included"
assert out.size(1) == 8, f"decoding should stop once every row has its <eos> (8 columns), got {out.size(1)}"
short = greedy_decode(copy_model, src, max_len=4, bos_id=BOS_ID, eos_id=EOS_ID)
assert short.shape == (2, 4), f"max_len=4 should give 4 columns, <bos> included; got {tuple(short.shape)}"
print("greedy_decode: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_greedy_decode_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): a scripted model (rows finishing at different steps,
# padding after <eos>, max_len) and a small random Transformer compared token for token.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb07 as _checks

_checks.check_greedy_decode(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 7. Beam search
#
# Greedy decoding commits to each token for good: a word that looks best now can force an
# awkward rest of the sentence. **Beam search** keeps the $k$ best partial translations
# (*hypotheses*) instead of one. At each step every unfinished hypothesis is extended by
# every token of the vocabulary, each candidate is scored, and the $k$ best survive; a
# hypothesis that has produced `<eos>` is finished and is carried to the next step as it
# is, competing with the longer ones.
#
# What score? The probability of a translation is the product of its tokens'
# probabilities, so we add **log-probabilities**: $\log P(Y) = \sum_t \log p(y_t \mid
# y_{<t}, x)$. Every extra token adds a negative number, so raw $\log P$ favours short
# translations. The paper (section 6.1) uses beam size 4 and the **length penalty** of
# Wu et al. (2016, GNMT), $\alpha = 0.6$:
#
# $$\text{score}(Y) = \frac{\log P(Y)}{lp(Y)}, \qquad lp(Y) = \left(\frac{5 + |Y|}{6}\right)^{\alpha},$$
#
# where $|Y|$ counts the generated tokens (`<eos>` included, `<bos>` not). With
# $\alpha = 0$ there is no normalisation; larger $\alpha$ favours longer translations.
# A row is done when all $k$ hypotheses it keeps are finished, or when the unfinished ones
# hold `max_len` tokens (a finished best hypothesis does not end the search: the others may
# still overtake it); it returns its best one. With $k = 1$, beam search is greedy decoding.
#
# **Exercise 7.** Write `beam_search(model, src, max_len, bos_id, eos_id, beam_size=4,
# length_penalty=0.6)`. It returns the same layout as `greedy_decode`. Looping over the
# rows of `src` one at a time is the simplest correct version, and a good first one. But Part B
# decodes the 1,000 sentences of the test set with your `beam_search`, and one row at a time
# costs one decoder call per sentence and step, where greedy decoding makes one per step for
# the whole batch (on an H200 it took 93 times greedy's time). On a slow or busy CPU that can
# take longer than the limit a notebook run from start to end often puts on one cell (30 minutes
# is common with `jupyter nbconvert --execute`), and the whole run's outputs are then lost with
# it. Once it works, batch the rows and their hypotheses together (hint 4).

# %% [markdown]
# **Stuck on `beam_search`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §6.1 (beam size 4, length penalty α = 0.6); [Wu et al., 2016, *Google's Neural Machine Translation System*](https://arxiv.org/abs/1609.08144), §7 (the length penalty).
#
# <details><summary>Hint 1: a nudge</summary>
#
# For one row, a hypothesis is a list of tokens and its summed log-probability. Start with a single hypothesis `[bos_id]` (not $k$ copies of it: they would fill the beam with copies of one translation).
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Each step: for every unfinished hypothesis, decode its tokens (causal mask, the source's padding mask) and take `log_softmax` of the last position's logits; every token gives a candidate `(tokens + [v], log_p + step_log_p[v])` (only a hypothesis's `beam_size` best tokens can make the beam, so `topk` saves time). Finished hypotheses are candidates as they are. Sort all candidates by their summed log-probability divided by the length penalty of Wu et al., $\mathrm{lp}(n) = ((5 + n) / 6)^{\alpha}$ with $\alpha$ = `length_penalty` and $n$ the number of tokens after `bos_id`, and keep `beam_size`. At the end, pad the rows' best hypotheses with `model.pad_id` to one length.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Python's `sorted(..., key=..., reverse=True)` and a slice keep the beam; the key is the normalised score of hint 2, computed the same way for finished and unfinished hypotheses. Stop when every hypothesis in the beam ends in `eos_id`, or when the longest has `max_len` tokens. `Tensor.topk` gives a hypothesis's best next tokens and their log-probabilities.
#
# </details>
# <details><summary>Hint 4: faster, once it works (optional)</summary>
#
# One row at a time calls the decoder once per row and step; on an H200 GPU that cost 93 times greedy decoding. Instead keep every row's $k$ hypotheses in one `(B * k, t)` tensor of tokens (the encoder output repeated with `repeat_interleave(k, dim=0)`) and their scores in a `(B, k)` tensor, starting at `0` for the first hypothesis and `-inf` for the others (so the first step cannot pick copies). Each step: one decoder call for all the hypotheses still growing (finished ones need none), candidate scores `(B, k, V)`, a finished hypothesis's only candidate itself (kept with a pad token), then `topk(k)` over each row's `k * V` candidates; `index // V` is the hypothesis it extends and `index % V` the token. The solution does this: beam 4 then took 2.2 times greedy decoding's time on two CPU cores (the executed solution's section 12), 2.4 times on an H200 and 1.1 times on an H100.
#
# </details>
#
# **Check yourself:** with `length_penalty=0`, does a bigger beam always give a better-scoring translation?
#
# <details><summary>Answer</summary>
#
# Usually but not always: beam search prunes, so a hypothesis that a smaller beam keeps can fall out of a bigger one's top $k$ at an earlier step while its continuation would have scored best. What a bigger beam does find more often is short, high-probability translations, which is why the length penalty matters more as $k$ grows.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "beam_search", "locked": false, "schema_version": 3, "solution": true}
@torch.no_grad()
def beam_search(model, src: torch.Tensor, max_len: int, bos_id: int, eos_id: int, beam_size: int = 4,
                length_penalty: float = 0.6) -> torch.Tensor:
    """Translate ``src`` keeping the ``beam_size`` best hypotheses at each step.

    A hypothesis ``Y`` scores ``log P(Y | src) / ((5 + |Y|) / 6) ** length_penalty``, ``|Y|``
    its generated tokens (``eos_id`` included). Finished hypotheses are carried over unchanged.

    Args:
        model: a ``Transformer`` in eval mode.
        src: ``(B, S)`` int64 source tokens, padded with ``model.pad_id``.
        max_len: the most tokens per output row, ``<bos>`` included.
        bos_id, eos_id: begin- and end-of-sentence ids.
        beam_size: hypotheses kept per row; 1 is greedy decoding.
        length_penalty: GNMT's alpha; 0 ranks by log-probability alone.

    Returns:
        ``(B, L)`` int64, ``L <= max_len``: each row's best hypothesis, column 0 ``bos_id``,
        ``model.pad_id`` after its ``eos_id``.
    """
    ### BEGIN SOLUTION
    # All rows and all their hypotheses in one batch of B * K: one decoder call per step.
    batch, k, pad = src.size(0), beam_size, model.pad_id
    src_mask = make_padding_mask(src, pad)  # (B, 1, 1, S)
    memory = model.encode(src, src_mask).repeat_interleave(k, dim=0)  # (B*K, S, D)
    src_mask = src_mask.repeat_interleave(k, dim=0)  # (B*K, 1, 1, S)
    ys = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=src.device)  # (B*K, t)
    log_p = torch.full((batch, k), float("-inf"), device=src.device)
    log_p[:, 0] = 0.0  # one live hypothesis per row to start with: no duplicates in the beam
    done = torch.zeros(batch, k, dtype=torch.bool, device=src.device)
    length = torch.zeros(batch, k, device=src.device)  # generated tokens, eos included

    def penalty(n: torch.Tensor) -> torch.Tensor:
        return ((5 + n) / 6) ** length_penalty

    rows = torch.arange(batch, device=src.device)[:, None]
    while ys.size(1) < max_len and not done.all():
        # Only the hypotheses still growing go through the decoder: a finished one needs no new token.
        live = (~done & (log_p > float("-inf"))).flatten().nonzero().squeeze(1)  # (n,) of B*K
        states = model.decode(ys[live], memory[live], src_mask[live], make_decoder_mask(ys[live], pad))  # (n, t, D)
        logits = model.generator(states[:, -1]).float()  # (n, V)
        step = torch.full((batch * k, logits.size(-1)), float("-inf"), device=src.device)
        step[live] = F.log_softmax(logits, dim=-1)  # (B*K, V); rows of finished hypotheses stay -inf
        vocab = step.size(-1)
        extended = log_p[..., None] + step.view(batch, k, vocab)  # (B, K, V)
        new_length = torch.full_like(extended, float(ys.size(1)))
        # A finished hypothesis has one candidate, itself (extended by a pad, score unchanged).
        kept = torch.full_like(extended, float("-inf"))
        kept[..., pad] = log_p
        extended = torch.where(done[..., None], kept, extended)
        new_length = torch.where(done[..., None], length[..., None], new_length)
        score = (extended / penalty(new_length)).view(batch, k * vocab)
        best = score.topk(k, dim=-1).indices  # (B, K): the K best candidates of each row
        parent, token = best // vocab, best % vocab
        log_p = extended.view(batch, -1).gather(1, best)
        length = new_length.view(batch, -1).gather(1, best)
        done = done[rows, parent] | (token == eos_id)
        ys = torch.cat([ys.view(batch, k, -1)[rows, parent], token[..., None]], dim=-1).view(batch * k, -1)
    winner = (log_p / penalty(length)).argmax(dim=-1)  # (B,)
    out = ys.view(batch, k, -1)[rows[:, 0], winner]  # (B, t)
    return out[:, : 1 + int(length[rows[:, 0], winner].max())]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_beam_search", "locked": true, "points": 1, "schema_version": 3, "solution": false}
### BEGIN HIDDEN TESTS
from course_reference.checks import nb07 as _checks

copy_model = _checks.copy_model(globals())  # trained with the reference train_epoch: graded on its own
### END HIDDEN TESTS
def _test_beam_search():
    copy_model.eval()
    src = torch.tensor([[5, 9, 7, 4, 11, 6, EOS_ID], [8, 8, 10, 5, 4, 7, EOS_ID]])
    beam = beam_search(copy_model, src, max_len=12, bos_id=BOS_ID, eos_id=EOS_ID, beam_size=4)
    print("source:", src[0].tolist(), "\nbeam:  ", beam[0].tolist())
    assert isinstance(beam, torch.Tensor) and beam.dim() == 2 and beam.size(0) == 2, "expected a (B, L) tensor"
    assert beam.size(1) <= 12, f"at most max_len columns, got {beam.size(1)}"
    assert (beam[:, 0] == BOS_ID).all(), "column 0 should be bos_id"
    assert beam[:, 1:8].tolist() == src.tolist(), "the copy model should reproduce the source with beam search too"
    one = beam_search(copy_model, src, max_len=12, bos_id=BOS_ID, eos_id=EOS_ID, beam_size=1)
    assert torch.equal(one[:, :8], greedy_decode(copy_model, src, max_len=12, bos_id=BOS_ID, eos_id=EOS_ID)), \
        "beam_size=1 should give greedy decoding's output"


### BEGIN HIDDEN TESTS
from course_reference.checks import isolate as _isolate

_test_beam_search = _isolate(globals(), _test_beam_search, **_checks.upstream("greedy_decode"))
### END HIDDEN TESTS
_test_beam_search()
print("beam_search: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_beam_search_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): models whose probabilities make beam search and greedy
# disagree, where the length penalty decides between a short and a longer translation, and
# beam_size=1 against greedy decoding on a small random Transformer.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb07 as _checks

_checks.check_beam_search(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 8. Subwords by hand: byte-pair encoding
#
# A model reads token ids from a fixed vocabulary. Whole words make a huge vocabulary
# (German compounds!) that still misses words at test time; single characters make
# sequences long and leave all the work to the model. **Byte-pair encoding** (Sennrich et
# al., 2016, *Neural Machine Translation of Rare Words with Subword Units*, Algorithm 1)
# finds pieces in between from the data:
#
# 1. Split every word into characters and end it with the symbol `</w>` (so `st</w>` at
#    the end of a word differs from `st` inside one).
# 2. Count every pair of adjacent symbols over the corpus, each word weighted by how
#    often it occurs.
# 3. Merge the most frequent pair everywhere it occurs (`e` `s` → `es`), remember the merge,
#    and repeat from step 2 for a fixed number of merges.
#
# Frequent words end up as one symbol; rare ones as a few frequent pieces. To split a word
# later, start from its characters plus `</w>` and replay the merges **in the order they
# were learned**, each on every occurrence from left to right: `a a a` with the merge
# (`a`, `a`) becomes `aa a`.
#
# **Exercise 8.** Write `learn_bpe(word_counts, num_merges)`, which returns the merges
# in order as pairs of strings, and `apply_bpe(word, merges)`, which returns a word's list
# of symbols. When two pairs are equally frequent, either may be taken (the tests avoid
# ties).

# %% [markdown]
# **Stuck on `learn_bpe`?** Open one hint at a time. Paper: [Sennrich et al., 2016, *Neural Machine Translation of Rare Words with Subword Units*](https://arxiv.org/abs/1508.07909), §3.2 and Algorithm 1; [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §5.1 (its sentences are byte-pair encoded).
#
# <details><summary>Hint 1: a nudge</summary>
#
# Keep the corpus as a dict from a word's current symbols (a tuple) to its count; each merge rewrites every key.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Start with `{tuple(word) + ("</w>",): count}`. Each step: add `count` to `pairs[(a, b)]` for every adjacent pair of every word; stop if there is none; take the largest; rebuild every word by walking its symbols left to right, joining `a` and `b` wherever they are next to each other.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# `collections.Counter` (or a dict) counts pairs; `max(..., key=...)` finds the most frequent. Ties: keep the pair counted first, as `max` does. Rebuilding a word is a loop with an index `i` that jumps by 2 after a merge and by 1 otherwise; it returns a new tuple.
#
# </details>
#
# **Check yourself:** why weight a pair by the word's count rather than count each distinct word once?
#
# <details><summary>Answer</summary>
#
# The merges should make the *text* short, and a word that occurs 500 times is 500 times in the text. Counting distinct words would spend merges on pieces of rare words while frequent words stay split.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "learn_bpe", "locked": false, "schema_version": 3, "solution": true}
def learn_bpe(word_counts: dict[str, int], num_merges: int) -> list[tuple[str, str]]:
    """Learn byte-pair-encoding merges (Sennrich et al., 2016, Algorithm 1).

    Args:
        word_counts: word -> how often it occurs.
        num_merges: the most merges to learn.

    Returns:
        The merges in the order learned, each a pair of symbols such as ``("e", "s")``;
        fewer than ``num_merges`` only when every word has become one symbol (a pair seen once is
        still merged).
    """
    ### BEGIN SOLUTION
    corpus = {tuple(word) + ("</w>",): count for word, count in word_counts.items()}
    merges = []
    for _ in range(num_merges):
        pairs = {}
        for symbols, count in corpus.items():
            for pair in zip(symbols, symbols[1:], strict=False):
                pairs[pair] = pairs.get(pair, 0) + count
        if not pairs:
            break
        best = max(pairs, key=pairs.get)
        merges.append(best)
        corpus = {merge_pair(symbols, best): count for symbols, count in corpus.items()}
    return merges


def merge_pair(symbols: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    """``symbols`` with every occurrence of ``pair`` joined, scanning left to right."""
    out, i = [], 0
    while i < len(symbols):
        if symbols[i:i + 2] == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_learn_bpe", "locked": true, "points": 1, "schema_version": 3, "solution": false}
corpus = {"low": 12, "lower": 9, "lowest": 5, "newer": 9, "newest": 4, "wider": 4}
merges = learn_bpe(corpus, 5)
print(merges)
assert isinstance(merges, list) and len(merges) == 5, f"expected a list of 5 merges, got {merges!r}"
assert all(isinstance(m, tuple) and len(m) == 2 for m in merges), "each merge is a pair of strings"
assert merges[0] == ("w", "e"), f"'w e' occurs 9 + 5 + 9 + 4 = 27 times, more than any other pair; got {merges[0]}"
assert ("r", "</w>") in merges, "'r' at the end of a word (22 times) should be merged with '</w>'"
assert len(learn_bpe({"ab": 3, "b": 2}, 10)) == 2, "stop when every word is a single symbol"
print("learn_bpe: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_learn_bpe_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): merges learned on small corpora without ties, compared
# with the reference's, and the known mistakes named.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb07 as _checks

_checks.check_learn_bpe(globals())
### END HIDDEN TESTS

# %% [markdown]
# **Stuck on `apply_bpe`?** Open one hint at a time. Paper: [Sennrich et al., 2016, *Neural Machine Translation of Rare Words with Subword Units*](https://arxiv.org/abs/1508.07909), §3.2 (applying the merges to unseen words); [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §5.1.
#
# <details><summary>Hint 1: a nudge</summary>
#
# The word is split exactly as the training corpus was: characters, `</w>`, then the merges one by one.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Start from `list(word) + ["</w>"]`; for each merge in order, rebuild the list joining the pair wherever both symbols stand side by side, scanning from the left.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# The same left-to-right rebuild you wrote for `learn_bpe`, applied once per merge, in the order the merges were learned. Compare whole symbols, pair by pair: joining the symbols into a string and using `str.replace` also matches across symbol boundaries.
#
# </details>
#
# **Check yourself:** can `apply_bpe` meet a word it cannot split, a character never seen in training?
#
# <details><summary>Answer</summary>
#
# It still returns symbols: unknown characters simply stay single characters (no merge mentions them). The model's vocabulary, built from the training symbols, has no id for them, so a real tokenizer maps them to `<unk>` or, like sentencepiece with `byte_fallback`, to their bytes.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "apply_bpe", "locked": false, "schema_version": 3, "solution": true}
def apply_bpe(word: str, merges: list[tuple[str, str]]) -> list[str]:
    """Split ``word`` into subword symbols with learned merges.

    Args:
        word: one word.
        merges: what ``learn_bpe`` returned, in the order learned.

    Returns:
        The symbols; they join to ``word + "</w>"``.
    """
    ### BEGIN SOLUTION
    symbols = tuple(word) + ("</w>",)
    for pair in merges:
        symbols = merge_pair(symbols, pair)
    return list(symbols)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_apply_bpe", "locked": true, "points": 1, "schema_version": 3, "solution": false}
### BEGIN HIDDEN TESTS
from course_reference.checks import nb07 as _checks

# Graded on its own: the merges below come from the reference learn_bpe (no later graded cell uses it).
learn_bpe = _checks.upstream("learn_bpe")["learn_bpe"]
### END HIDDEN TESTS
pieces = apply_bpe("lowest", learn_bpe(corpus, 5))
print(pieces)
assert isinstance(pieces, list) and "".join(pieces) == "lowest</w>", f"the symbols should join to 'lowest</w>', got {pieces!r}"
assert apply_bpe("aaa", [("a", "a")]) == ["aa", "a", "</w>"], "merge from the left: 'a a a' -> 'aa a'"
assert apply_bpe("xyz", []) == ["x", "y", "z", "</w>"], "no merges: the characters and '</w>'"
print("apply_bpe: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_apply_bpe_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): words seen and unseen in training, repeated letters,
# compared with the reference.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb07 as _checks

_checks.check_apply_bpe(globals())
### END HIDDEN TESTS

# %% [markdown]
# # Part B: training on Multi30k
#
# Everything below uses your functions from Part A and the course's `Transformer`
# (notebook 06's reference, from `course_blocks`). It runs as it is; read it, run it, and
# change the configuration to experiment.
#
# ## 9. Configuration
#
# Two configurations are chosen automatically: `gpu` on a GPU with bfloat16 tensor cores,
# `cpu` otherwise (sized for 10 minutes on 2 CPU cores; on an older GPU it trains there, in
# float32: see below). `tiny` is a one-minute smoke run
# (what CI executes). Training stops at the time budget or after `max_epochs`, whichever
# comes first, or earlier when the validation loss has stopped improving (see below).
# `COURSE_TRAIN_MINUTES` sets another time budget; `COURSE_TIE_EMBEDDINGS=1` (or `0`)
# trains with the target embedding and the generator tied (or not): one matrix; the paper,
# section 3.4, ties the source embedding to them as well, which our shared vocabulary
# would allow.
#
# Why these sizes: in 10 minutes on 2 cores a model sees each training pair only a handful
# of times. Two layers of $D = 256$ learn fastest per second there, and **dropout is off**:
# dropout fights over-fitting, which a long run needs, and in so short a run it mostly slows
# learning. Read the argument off the validation figures, not the test set's: in the executed
# solution's run without dropout, the validation loss fell at every one of its five evaluations,
# down to 2.697 (validation BLEU 34.50) at the last, after a fifth epoch the time budget cut
# short (237 of its 287 batches), so no over-fitting appeared for dropout to prevent. (The test
# set, test_2016_flickr, is scored once, in section 12, for the model and decoder already
# chosen: a test set used to pick a configuration no longer measures how the choice does on
# unseen sentences.) The price comes with a longer run, on a faster machine or a larger
# budget: without dropout the model starts to over-fit after a few epochs, and the validation
# loss turns up while the training loss keeps falling. So training keeps the checkpoint with
# the lowest validation loss and stops when that has not improved for `patience` evaluations
# (**early stopping**); the curves in section 11 show whether it happened.
#
# A GPU passes over the 29,000 training pairs well over a hundred times in 10 minutes, so its
# configuration is built against over-fitting and noise instead: dropout 0.3, a
# target embedding tied to the output layer (paper, section 3.4), an evaluation every 30
# seconds of training rather than every epoch, patience of 6 evaluations (3 minutes: one
# noisy evaluation cannot end a run that is still improving), and **checkpoint averaging**
# (paper, section 6.1): the kept weights are the mean of the best evaluation's and the four
# before it, when that mean has the lower validation loss. Its learning rate is low for its
# size on purpose. Post-LN stacks (the paper's layout, ours) are fragile at high rates: on
# one H200, four layers of $D = 512$ at a peak of 1e-3 after 800 warm-up steps stopped aligning
# English with German, and every cross-attention head spread its weight evenly over the German
# tokens. Uniform weights do not cut the source off: they hand every English position the same
# mean of the encoder's values, a summary of the whole sentence with no alignment in it, and
# that run still translated at 17.7 BLEU (one run). Notebook 08 shows the pre-LN layout that
# is less fragile. At the peak of 5e-4 after 1,500 warm-up steps below, three layers on the same
# GPU passed 38 validation BLEU after 3.6 minutes of training; the weights it kept in 7 minutes
# (those of the lowest validation loss) scored 41.6 on the validation set, and on the test set
# 40.4 with greedy decoding and 41.3 with beam search (that run, made before section 12 chose its
# decoder on the validation set, decoded the test set with both; nothing was chosen from them).
#
# **On an older GPU (Colab's free T4, a V100).** The `gpu` configuration is sized for a GPU
# whose tensor cores take bf16 (compute capability 8.0 or higher: an A100, an H100, an RTX
# 30-series card or newer). A T4 (compute capability 7.5) and a V100 (7.0) have tensor cores for
# float16 only, so there the large model would train in float32 at a fraction of the speed: the
# course's benchmarks page *estimates* (no T4 run has been measured) about 940 steps in 10
# minutes, still inside the 1,500-step warm-up, and 20 to 30 BLEU. So `choose_configuration`
# below gives such a GPU the small `cpu` model, which trains on it in float32, and the cell
# prints why. float16 would need one more piece: a gradient scaler (`torch.amp.GradScaler`)
# multiplies the loss before the backward pass so that small gradients do not round to zero in
# float16, and divides them again before the optimizer step. That loop differs from your
# `train_epoch`; on an H100 it trained at the pace of bf16, step for step (benchmarks page).
# `COURSE_TRAIN_CONFIG` overrides the choice.
#
# **Your own model.** Part B trains the course's `Transformer` (notebook 06's reference). Set
# `USE_MY_MODULES = True` below to train the one *you* built instead: `my_modules.load`
# runs the answer cells of your notebooks 01-06 (from the folders beside this one) and
# checks each of your blocks against the course's on a small input, in the order the
# notebooks build them; the first one that differs is named, with its notebook. Every
# figure below then comes from your own code.

# %%
@dataclass(frozen=True)
class Config:
    name: str
    d_model: int
    num_heads: int
    num_layers: int
    d_ff: int
    dropout: float
    vocab_size: int  # one sentencepiece vocabulary shared by German and English
    batch_tokens: int  # tokens per batch (the longest sentence times the batch size)
    peak_lr: float  # the noam schedule, scaled so that it peaks at this rate
    warmup_steps: int
    minutes: float  # training time budget
    max_epochs: int
    train_pairs: int | None = None  # None: all 29,000
    eval_pairs: int | None = None  # None: all of val and test
    max_output_len: int = 128  # the longest translation, in tokens
    tie_embeddings: bool = False  # share the target embedding and the generator (paper section 3.4)
    eval_minutes: float | None = None  # evaluate every this many minutes of training (None: after each epoch)
    patience: int = 2  # early stopping: evaluations without a lower validation loss before training stops
    average: int = 1  # the weights kept: the mean of the best evaluation's and the (average - 1) before it


CONFIGS = {
    "gpu": Config("gpu", d_model=512, num_heads=8, num_layers=3, d_ff=2048, dropout=0.3, vocab_size=8000,
                  batch_tokens=16000, peak_lr=5e-4, warmup_steps=1500, minutes=10, max_epochs=200,
                  tie_embeddings=True, eval_minutes=0.5, patience=6, average=5),
    "cpu": Config("cpu", d_model=256, num_heads=8, num_layers=2, d_ff=1024, dropout=0.0, vocab_size=4000,
                  batch_tokens=2000, peak_lr=2e-3, warmup_steps=150, minutes=10, max_epochs=20),
    "tiny": Config("tiny", d_model=64, num_heads=4, num_layers=1, d_ff=128, dropout=0.1, vocab_size=1000,
                   batch_tokens=2000, peak_lr=2e-3, warmup_steps=20, minutes=0.25, max_epochs=2,
                   train_pairs=2000, eval_pairs=40, max_output_len=24),
}
GRADING = os.environ.get("COURSE_GRADING") == "1"  # set by the course's grader: Part B is skipped
USE_MY_MODULES = os.environ.get("COURSE_MY_MODULES") == "1"  # or set it to True here
if USE_MY_MODULES and not GRADING:
    import my_modules

    Transformer = my_modules.load("..").Transformer  # your notebooks 01-06, each block checked first
    print("Part B trains your own Transformer, built from your notebooks 01-06")


def choose_configuration(capability: tuple[int, int] | None) -> str:
    """The configuration for a machine whose GPU has CUDA compute ``capability`` (None: no GPU).

    bfloat16 tensor cores came with compute capability 8.0 (A100, RTX 30xx, L4, H100); on an older
    GPU (a T4 is 7.5, a V100 7.0) the large model would train in float32 at a fraction of the speed,
    so it gets the small model, which trains there in float32 (on the GPU, not the CPU).
    """
    return "gpu" if capability is not None and tuple(capability) >= (8, 0) else "cpu"


capability = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
choice = os.environ.get("COURSE_TRAIN_CONFIG") or choose_configuration(capability)
if choice not in CONFIGS:
    raise ValueError(f"COURSE_TRAIN_CONFIG={choice!r}; expected one of {sorted(CONFIGS)}")
CONFIG = CONFIGS[choice]
if os.environ.get("COURSE_TIE_EMBEDDINGS") in ("0", "1"):  # one switch to compare tied and separate embeddings
    CONFIG = replace(CONFIG, tie_embeddings=os.environ["COURSE_TIE_EMBEDDINGS"] == "1")
if os.environ.get("COURSE_TRAIN_MINUTES"):  # a shorter (or longer) budget without editing the table
    CONFIG = replace(CONFIG, minutes=float(os.environ["COURSE_TRAIN_MINUTES"]))
device = torch.device("cuda" if capability is not None else "cpu")  # any configuration trains on a GPU
if device.type == "cpu":
    torch.set_num_threads(os.cpu_count() or 1)


# Mixed precision on a GPU only. CPU autocast also runs LayerNorm and softmax in bf16 (CUDA's
# keeps them in float32), and training then stalls: measured here, loss 7.9 vs 5.5 after 80 steps.
use_bf16 = device.type == "cuda" and tuple(capability) >= (8, 0)  # bf16 tensor cores (see above)
autocast = lambda: torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16)  # noqa: E731
name = torch.cuda.get_device_name() if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
why = (f" (compute capability {capability[0]}.{capability[1]}: no bf16 tensor cores)"
       if device.type == "cuda" and not use_bf16 else "")
print(f"configuration: {CONFIG.name} on {name}, {'bf16 mixed precision' if use_bf16 else 'float32'}{why}"
      + ("  [grading: Part B is skipped]" if GRADING else ""))
print(asdict(CONFIG))


def precision_notice(device_type: str, use_bf16: bool, seen: set[torch.dtype]) -> str | None:
    """What to say when the logits your ``train_epoch`` produced (their dtypes, ``seen``) are not in the
    precision this machine should train in (``use_bf16``: a GPU with bf16 tensor cores); None when they are."""
    if device_type != "cuda" or not seen:
        return None
    if use_bf16 and torch.bfloat16 not in seen:
        return ("Notice: your train_epoch ran the forward pass in float32 on a GPU with bf16 tensor cores: "
                "about half the speed it could have (section 5: torch.autocast)")
    if not use_bf16 and torch.bfloat16 in seen:
        return ("Notice: your train_epoch autocast to bf16 on a GPU without bf16 tensor cores: PyTorch emulates "
                "it there, slower than float32, so the 'float32' printed above no longer holds (section 5: enable "
                "autocast only where torch.cuda.is_bf16_supported(including_emulation=False))")
    return None

# %% [markdown]
# ## 10. The data
#
# `multi30k.load_split` downloads the raw files on first use (from the dataset's GitHub
# repository, at a pinned commit), checks their sha256 sums, and returns the sentences.
# Offline, set `MULTI30K_DIR` to a folder holding the six `.gz` files.

# %%
if not GRADING:
    import multi30k

    train_de, train_en = multi30k.load_split("train")
    val_de, val_en = multi30k.load_split("val")
    test_de, test_en = multi30k.load_split("test_2016_flickr")
    print(f"train {len(train_de):,} · val {len(val_de):,} · test_2016_flickr {len(test_de):,} pairs")
    for german, english in zip(train_de[:3], train_en[:3], strict=True):
        print(f"  de: {german}\n  en: {english}")
    if CONFIG.train_pairs:
        train_de, train_en = train_de[: CONFIG.train_pairs], train_en[: CONFIG.train_pairs]
    if CONFIG.eval_pairs:
        val_de, val_en = val_de[: CONFIG.eval_pairs], val_en[: CONFIG.eval_pairs]
        test_de, test_en = test_de[: CONFIG.eval_pairs], test_en[: CONFIG.eval_pairs]

# %% [markdown]
# **Subwords.** The run's vocabulary is byte-pair encoding, learned by the
# sentencepiece library (Kudo and Richardson, 2018) with `model_type="bpe"`: the algorithm
# of section 8, written in C++ for speed. It learns on the training sentences of both
# languages, so the two share one vocabulary (names and numbers are spelt alike), and is
# cached on disk after the first run. Two differences from section 8: sentencepiece marks
# the *start* of a word with `▁` instead of ending it with `</w>`, and it treats the
# sentence as raw text, spaces included, so the tokens decode back to the exact sentence.

# %%
if not GRADING:
    tokenizer = multi30k.train_tokenizer(train_de + train_en, vocab_size=CONFIG.vocab_size, model_type="bpe")
    assert (tokenizer.pad_id(), tokenizer.bos_id(), tokenizer.eos_id()) == (PAD_ID, BOS_ID, EOS_ID)
    for sentence in (train_de[0], train_en[0]):
        print(tokenizer.encode(sentence, out_type=str))
    train_pairs = multi30k.encode_pairs(tokenizer, train_de, train_en)
    lengths = [len(t) for t in train_pairs.tgt]
    fig, ax = plt.subplots(figsize=(6, 2.8))
    ax.hist([len(s) for s in train_pairs.src], bins=range(0, 60), alpha=0.6, label="German (source)")
    ax.hist(lengths, bins=range(0, 60), alpha=0.6, label="English (target)")
    ax.set(xlabel="tokens per sentence", ylabel="sentences", title="Sentence lengths in subword tokens")
    ax.legend()
    plt.tight_layout()
    plt.show()
    print(f"Notice: captions are short (median {sorted(lengths)[len(lengths) // 2]} target tokens), "
          "so attention's L² cost is small here.")

# %% [markdown]
# How do your merges compare? Below, your `learn_bpe` learns 40 merges on the same
# sentences split into words at spaces, next to sentencepiece's merged pieces (it lists
# them in the order learned, after the special tokens). Both lists go through the same
# filter: word markers removed, then one-character strings and repeats dropped (`e</w>` and
# `▁e` both become `e`), and the first 20 that remain are shown. Expect many of the same
# strings, not the same list: `▁` glues a piece to the word's start where `</w>` glues it
# to the end, so the two count different pairs (`▁ein` at the start of *ein*, `ein</w>` at
# the end of *klein*).

# %%
if not GRADING:
    from collections import Counter

    word_counts = Counter(word for sentence in train_de + train_en for word in sentence.split())
    begin = time.monotonic()
    merges = learn_bpe(dict(word_counts), 40)
    seconds = time.monotonic() - begin

    def shown(pieces: list[str], marker: str) -> list[str]:
        """The first 20 pieces of two or more characters once the word marker is removed, each once."""
        stripped = [piece.replace(marker, "") for piece in pieces]
        return list(dict.fromkeys(piece for piece in stripped if len(piece) > 1))[:20]

    ours = shown(["".join(pair) for pair in merges], "</w>")
    theirs = shown([tokenizer.id_to_piece(i) for i in range(4, tokenizer.get_piece_size())], "▁")
    print(f"{'learn_bpe':>12}: {' '.join(ours)}\n{'sentencepiece':>12}: {' '.join(theirs)}")
    print(f"Notice: {len(set(ours) & set(theirs))} of these {len(ours)} and {len(theirs)} strings agree; "
          f"learn_bpe took {seconds:.1f} s for 40 merges on {len(word_counts):,} distinct words.")

# %% [markdown]
# **Batches by length.** Sentences of similar length go in the same batch, so little of
# each batch is padding; a batch holds about `batch_tokens` tokens, so short sentences make
# big batches. The order of the batches is shuffled every epoch.

# %%
if not GRADING:
    train_loader = multi30k.BatchLoader(train_pairs, max_tokens=CONFIG.batch_tokens, shuffle=True)
    val_loader = multi30k.BatchLoader(multi30k.encode_pairs(tokenizer, val_de, val_en),
                                      max_tokens=CONFIG.batch_tokens, shuffle=False)
    src, tgt = next(iter(train_loader))
    real = (tgt != PAD_ID).float().mean().item()
    print(f"{len(train_loader)} batches per epoch; one batch: src {tuple(src.shape)}, tgt {tuple(tgt.shape)}, "
          f"{real:.0%} of target positions are real tokens")

# %% [markdown]
# ## 11. Training
#
# Adam with the paper's betas, the noam schedule (scaled to peak at `peak_lr`: the paper's
# formula peaks at about 7e-4 for $D=512$ and 4,000 warm-up steps; our runs are much
# shorter, so the warm-up is too), label smoothing 0.1, gradient clipping, and your
# `train_epoch`. After every epoch we measure the validation loss (and BLEU); a checkpoint
# is saved whenever the validation loss is the lowest so far, and that best checkpoint,
# not the last epoch, is the model evaluated from here on. At the end we print the throughput, in target tokens (padding excluded) per second of
# training, and the peak memory: what sizes of model and batch a machine can afford.

# %%
class Recorder(nn.Module):
    """Wraps a loss function and records each batch's loss (for the curve) and its target tokens
    (padding excluded: the throughput below counts the words the model learned from)."""

    def __init__(self, loss_fn: nn.Module):
        super().__init__()
        self.loss_fn, self.losses, self.tokens = loss_fn, [], 0

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        loss = self.loss_fn(logits, labels)
        self.losses.append(loss.item())
        self.tokens += int((labels != PAD_ID).sum())
        return loss


def peak_memory() -> str:
    """The most memory training held: on a GPU, what PyTorch's allocator held (since the last reset
    of its statistics); on a CPU, the process's peak resident set (data and tokenizer included)."""
    if device.type == "cuda":
        return f"{torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB of GPU memory"
    try:
        import resource
    except ImportError:  # Windows has no getrusage
        return "not measured on this system"
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 if sys.platform == "darwin" else 1)
    return f"{kib / 2**20:.1f} GiB of RAM (the whole process)"


def until(deadline: float, batches, bar):
    """The batches of the iterator ``batches`` until the time is up, advancing a progress bar (none
    is drawn from it once the time is up, so the next round starts with the next batch)."""
    while time.monotonic() < deadline:
        batch = next(batches, None)
        if batch is None:
            return
        yield batch
        bar.update(1)


def forever(loader):
    """The loader's batches, epoch after epoch (each epoch shuffled anew)."""
    while True:
        yield from loader


def averaged(states: list[dict]) -> dict:
    """The element-wise mean of several state dicts of one model (checkpoint averaging)."""
    return {name: torch.stack([state[name].float() for state in states]).mean(dim=0).to(states[0][name].dtype)
            for name in states[0]}


def translate(model, sentences: list[str], batch_size: int = 200, decode=None) -> list[str]:
    """German sentences -> English with ``decode`` (default: your greedy_decode); sorted by length for speed."""
    decode = decode or greedy_decode
    model.eval()
    encoded = [ids[:127] + [EOS_ID] for ids in tokenizer.encode(sentences)]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out = [""] * len(encoded)
    for first in tqdm(range(0, len(order), batch_size), desc="translating", leave=False):
        rows = order[first:first + batch_size]
        src = multi30k.pad([encoded[i] for i in rows]).to(device)
        with autocast():
            max_len = min(int(src.size(1) * 1.5) + 10, CONFIG.max_output_len)
            ids = decode(model, src, max_len=max_len, bos_id=BOS_ID, eos_id=EOS_ID)
        for i, text in zip(rows, multi30k.decode_ids(tokenizer, ids.cpu()), strict=True):
            out[i] = text
    return out


@torch.no_grad()
def validation_loss(model, loader, loss_fn) -> float:
    model.eval()
    total, tokens = 0.0, 0
    for src, tgt in loader:
        decoder_input, labels = make_teacher_forcing_batch(tgt.to(device), PAD_ID)
        with autocast():
            logits = model(src.to(device), decoder_input)
        n = int((labels != PAD_ID).sum())
        total, tokens = total + loss_fn(logits.float(), labels).item() * n, tokens + n
    return total / tokens


# %%
if not GRADING:
    torch.manual_seed(0)
    model = Transformer(CONFIG.vocab_size, CONFIG.vocab_size, d_model=CONFIG.d_model, num_heads=CONFIG.num_heads,
                        num_layers=CONFIG.num_layers, d_ff=CONFIG.d_ff, dropout=CONFIG.dropout,
                        pad_id=PAD_ID, tie_embeddings=CONFIG.tie_embeddings).to(device)
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scale = CONFIG.peak_lr / noam_lr(CONFIG.warmup_steps, CONFIG.d_model, CONFIG.warmup_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(  # LambdaLR counts from 0; noam_lr from 1
        optimizer, lambda step: scale * noam_lr(step + 1, CONFIG.d_model, CONFIG.warmup_steps))
    loss_fn = Recorder(LabelSmoothingLoss(0.1, ignore_index=PAD_ID))
    checkpoint = Path("checkpoints") / f"07_transformer_{CONFIG.name}.pt"
    checkpoint.parent.mkdir(exist_ok=True)

    history, rates, best, recent = [], [], None, []  # recent: the last CONFIG.average evaluations' weights
    precisions = set()  # the dtypes of the logits during training
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.monotonic()
    deadline = start + CONFIG.minutes * 60
    stream = forever(train_loader)  # used when evaluating every few minutes rather than every epoch
    for evaluation in itertools.count(1):
        timed = CONFIG.eval_minutes is not None
        batches = stream if timed else iter(train_loader)
        stop = min(deadline, time.monotonic() + CONFIG.eval_minutes * 60) if timed else deadline
        with tqdm(total=None if timed else len(train_loader), desc=f"round {evaluation}", unit="batch",
                  leave=False) as bar:
            rates += [scheduler.get_last_lr()[0]]  # the rate at the start of the round
            # Your train_epoch runs the forward pass under autocast on a GPU with bf16 (section 5); backward
            # and the optimizer step stay outside it, as in PyTorch's mixed-precision recipe. The hook notes
            # the logits' dtype, so that a loop in another precision than this machine's is named below.
            hook = model.register_forward_hook(lambda module, inputs, logits: precisions.add(logits.dtype))
            train_loss = train_epoch(model, until(stop, batches, bar), optimizer, scheduler, loss_fn, device)
            hook.remove()
            batches_seen = bar.n
        minutes = (time.monotonic() - start) / 60  # training time only; evaluation is not counted
        val_loss = validation_loss(model, val_loader, LabelSmoothingLoss(0.1, ignore_index=PAD_ID))
        val_bleu = multi30k.bleu(translate(model, val_de), val_en)["cased"].score
        start += (time.monotonic() - start) - minutes * 60  # pause the clock while evaluating
        deadline = start + CONFIG.minutes * 60
        epochs = scheduler.last_epoch / len(train_loader)
        # A round the time budget cut short is labelled so: its training loss is the mean of its few batches,
        # late in training, not an epoch's mean like the rounds before it.
        partial = not timed and batches_seen < len(train_loader)
        label = (f"step {scheduler.last_epoch} (epoch {epochs:.1f})" if timed
                 else f"epoch {evaluation}" + (f" (partial: {batches_seen} of {len(train_loader)} batches)" * partial))
        history.append({"evaluation": evaluation, "label": label, "epochs": epochs, "train_loss": train_loss,
                        "val_loss": val_loss, "val_bleu": val_bleu, "minutes": minutes, "steps": scheduler.last_epoch,
                        "partial": partial})
        if CONFIG.average > 1:  # copies on the CPU: a GPU's memory is for training
            recent = (recent + [{k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}])
            recent = recent[-CONFIG.average:]
        improved = best is None or val_loss < best["val_loss"]
        if improved:  # early stopping keeps the best model seen, not the last
            best = history[-1]
            torch.save({"model": model.state_dict(), "config": asdict(CONFIG), "history": history,
                        "averaged": averaged(recent) if len(recent) > 1 else None, "window": len(recent)},
                       checkpoint)
        print(f"{label}: train loss {train_loss:.3f}, val loss {val_loss:.3f}, val BLEU {val_bleu:5.2f}, "
              f"{minutes:.1f} min of training" + ("  (best so far: saved)" * improved))
        # The round stops at the first batch past the deadline, so a budget used up shows in `minutes`
        # (the clock is paused while evaluating: time.monotonic() is just short of the moved deadline).
        if minutes >= CONFIG.minutes or scheduler.last_epoch >= CONFIG.max_epochs * len(train_loader):
            break
        if evaluation - best["evaluation"] >= CONFIG.patience:
            print(f"stopping early: no lower validation loss in the {CONFIG.patience} evaluations since "
                  f"{best['label']}")
            break
    train_minutes = (time.monotonic() - start) / 60
    throughput = loss_fn.tokens / (train_minutes * 60)
    memory = peak_memory()  # taken now: evaluation below is not training
    saved = torch.load(checkpoint, map_location=device)
    model.load_state_dict(saved["model"])
    if saved["averaged"] is not None:  # checkpoint averaging (paper, section 6.1): keep it if it is better
        model.load_state_dict(saved["averaged"])
        mean_loss = validation_loss(model, val_loader, LabelSmoothingLoss(0.1, ignore_index=PAD_ID))
        print(f"the mean of the weights of the {saved['window']} evaluations up to {best['label']}: val loss "
              f"{mean_loss:.3f}, against {best['val_loss']:.3f} for {best['label']}'s weights alone: "
              + ("the mean is kept" if mean_loss < best["val_loss"] else "those are kept"))
        if mean_loss >= best["val_loss"]:
            model.load_state_dict(saved["model"])
    print(f"trained {train_minutes:.1f} minutes on {name}: {loss_fn.tokens:,} target tokens, {throughput:,.0f} "
          f"tokens/s; peak memory {memory}\nkept {best['label']} (lowest validation loss, "
          f"{best['val_loss']:.3f}): {checkpoint}")
    if notice := precision_notice(device.type, use_bf16, precisions):
        print(notice)
    if history[-1]["epochs"] < 1:  # a slow or busy machine: say what the figures below are worth
        print(f"Notice: in {train_minutes:.1f} minutes this machine made {history[-1]['steps']} steps, "
              f"{history[-1]['epochs']:.2f} of an epoch: the model has not yet seen every training pair once, "
              "and its translations will be poor. Give it more minutes (COURSE_TRAIN_MINUTES), a quieter "
              "machine, or a GPU.")

# %%
if not GRADING:
    steps = range(1, len(loss_fn.losses) + 1)
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.5))
    axes[0].plot(steps, loss_fn.losses, alpha=0.4, label="train (per batch)")
    axes[0].plot([h["steps"] for h in history], [h["val_loss"] for h in history], marker="o", label="validation")
    axes[0].axvline(best["steps"], color="grey", linestyle=":", label=f"kept: {best['label']}")
    axes[0].set(xlabel="step", ylabel="label-smoothed loss", title="Loss")
    axes[0].legend()
    schedule = [scale * noam_lr(s, CONFIG.d_model, CONFIG.warmup_steps) for s in steps]
    axes[1].plot(steps, schedule, color="C2")
    axes[1].set(xlabel="step", ylabel="learning rate", title="Learning rate (noam, scaled)")
    axes[2].plot([0] + [h["minutes"] for h in history], [0] + [h["val_bleu"] for h in history], marker="o", color="C3")
    axes[2].set(xlabel="minutes of training", ylabel="BLEU (val, cased)", title=f"BLEU against time ({CONFIG.name})")
    plt.tight_layout()
    plt.show()
    last = history[-1]
    # Like with like: a partial round's training loss is the mean of a few late batches, so the training
    # trend is read from whole epochs (or timed rounds) only.
    whole = [h for h in history if not h["partial"] and h["evaluation"] >= best["evaluation"]]
    falling = len(whole) > 1 and whole[-1]["train_loss"] < whole[0]["train_loss"]
    if last["val_loss"] > best["val_loss"] + 0.02:
        trend = (f"the validation loss was lowest after {best['label']} ({best['val_loss']:.3f}) and rose "
                 f"after it, to {last['val_loss']:.3f}"
                 + (", while the training loss kept falling: the model began to over-fit" if falling else "")
                 + f", so the rest of this notebook uses the weights kept at {best['label']}")
    elif last is best:
        trend = (f"the validation loss was still falling at the end ({best['val_loss']:.3f}): no sign of "
                 "over-fitting yet, and more training would likely help")
    else:
        trend = (f"the validation loss was lowest after {best['label']} ({best['val_loss']:.3f}) and stayed "
                 f"near it: the model is close to what this configuration can learn")
    top = max(history, key=lambda h: h["val_bleu"])
    print(f"Notice: {trend}. BLEU, which scores the most likely words and not their probabilities, peaked "
          f"at {top['label']} ({top['val_bleu']:.2f}); the two need not agree.")
    print("\nBLEU against time:\n  minutes  steps  val BLEU")
    for h in history:
        print(f"  {h['minutes']:7.1f}  {h['steps']:5d}  {h['val_bleu']:8.2f}")

# %% [markdown]
# ## 12. Translating and measuring: BLEU
#
# BLEU (Papineni et al., 2002) compares n-grams (1 to 4 words) of the translations with
# the references, with a penalty for translations shorter than the references. We compute
# it with **sacreBLEU** (Post, 2018), which fixes the tokenisation so that scores are
# comparable between papers, and print its signature. The default is cased with the `13a`
# tokeniser; many tutorials report lowercased scores, so we print both.

# %%
if not GRADING:
    begin = time.monotonic()
    greedy_val = translate(model, val_de)
    greedy_seconds = time.monotonic() - begin
    greedy_score = multi30k.bleu(greedy_val, val_en)
    print(f"val, greedy: BLEU {greedy_score['cased'].score:5.2f} cased, {greedy_score['lowercase'].score:5.2f} "
          f"lowercase (BP {greedy_score['cased'].bp:.3f}; {len(val_de)} sentences in {greedy_seconds:.0f} s)")

# %% [markdown]
# **Greedy or beam?** The same model, decoded with your `beam_search` (beam size 4,
# $\alpha = 0.6$, as in the paper), on the validation set: choosing a decoder is a choice
# like any other, so it is made on validation sentences. *Predict first:* how many BLEU
# points will the beam add, and how much longer will decoding take?

# %%
if not GRADING:
    from functools import partial

    beam = partial(beam_search, beam_size=4, length_penalty=0.6)
    # A beam search can be slow (one row at a time, on a busy CPU): time it on a few sentences first
    # and decode as many as fit in BEAM_SECONDS, rather than lose every output to a cell's time limit.
    BEAM_SECONDS, probe = 600, min(40, len(val_de))
    begin = time.monotonic()
    translate(model, val_de[:probe], decode=beam)
    estimate = (time.monotonic() - begin) * len(val_de) / probe
    count = len(val_de) if estimate <= BEAM_SECONDS else max(probe, int(len(val_de) * BEAM_SECONDS / estimate))
    if count < len(val_de):
        print(f"Notice: beam search would take about {estimate / 60:.0f} minutes for all {len(val_de)} validation "
              f"sentences here, so it decodes the first {count}; greedy is scored on the same {count}.")
    begin = time.monotonic()
    beam_val = translate(model, val_de[:count], decode=beam)
    beam_seconds = time.monotonic() - begin
    beam_bleu = multi30k.bleu(beam_val, val_en[:count])
    greedy_bleu = greedy_score if count == len(val_de) else multi30k.bleu(greedy_val[:count], val_en[:count])
    greedy_part = greedy_seconds * count / len(val_de)
    print(f"val, cased BLEU: greedy {greedy_bleu['cased'].score:5.2f} in {greedy_part:.0f} s, "
          f"beam 4 {beam_bleu['cased'].score:5.2f} in {beam_seconds:.0f} s "
          f"(lowercase {greedy_bleu['lowercase'].score:.2f} and {beam_bleu['lowercase'].score:.2f})")
    changed = sum(g != b for g, b in zip(greedy_val, beam_val, strict=False))
    print(f"Notice: beam search changed {changed} of {count} translations and moved BLEU by "
          f"{beam_bleu['cased'].score - greedy_bleu['cased'].score:+.2f}, at {beam_seconds / greedy_part:.1f}x "
          "the decoding time.")
    # The decoder for the test set: beam where it scored higher and can decode every sentence in time.
    chosen = "beam 4" if beam_bleu["cased"].score > greedy_bleu["cased"].score and count == len(val_de) else "greedy"
    print(f"chosen on the validation set: {chosen}")

# %% [markdown]
# **The test set, once.** Every choice so far (the configuration, the checkpoint, the
# decoder) was made on the validation set. The test set, test_2016_flickr, is decoded now,
# once, with the chosen decoder: a test set that has been used to choose no longer measures
# how the choice does on sentences it has never seen.

# %%
if not GRADING:
    begin = time.monotonic()
    test_hypotheses = translate(model, test_de, decode=beam if chosen == "beam 4" else None)
    seconds = time.monotonic() - begin
    test_score = multi30k.bleu(test_hypotheses, test_en)
    print(f"test_2016_flickr, {chosen}: BLEU {test_score['cased'].score:5.2f} cased, "
          f"{test_score['lowercase'].score:5.2f} lowercase "
          f"(BP {test_score['cased'].bp:.3f}; {len(test_de)} sentences in {seconds:.0f} s)")
    print("sacreBLEU signature:", test_score["signature"])
    print("                    ", test_score["signature_lc"])
    print(f"configuration {CONFIG.name} on {name}: {train_minutes:.1f} min of training, "
          f"{history[-1]['steps']} steps, {history[-1]['epochs']:.1f} epochs (kept {best['label']}), "
          f"{throughput:,.0f} target tokens/s, peak memory {memory}")

# %% [markdown]
# A few validation sentences (the first is easy, the others less so):

# %%
if not GRADING:
    for i in sorted({min(i, count - 1) for i in (0, 13, 42, 99)}):  # a short validation run has fewer
        print(f"de:        {val_de[i]}\nreference: {val_en[i]}\ngreedy:    {greedy_val[i]}\n"
              f"beam 4:    {beam_val[i]}\n")

# %% [markdown]
# **Teacher forcing against free running.** In training the decoder always sees the
# *reference* prefix (teacher forcing); when translating it sees *its own* prefix. The
# mismatch has a name, **exposure bias** (Ranzato et al., 2016, *Sequence Level Training with
# Recurrent Neural Networks*): the model is trained only on prefixes taken from the data, yet
# must continue prefixes it wrote itself, and after an early slip those can look unlike
# anything it was trained on, so one error may lead to more. Scheduled sampling (Bengio et al.,
# 2015) and sequence-level training are attempts to close that gap.
#
# Below, the same model on the same validation sentences, three curves over the target
# positions: (a) how often the model's most likely next token is the reference's, given the
# reference prefix; (b) how often the token greedy decoding wrote at that position is the
# reference's token at the *same* position; (c) how many greedy outputs still agree with the
# reference at every position up to that one (they have not yet left it). *Predict first:*
# how far apart will (a) and (b) be at position 10?
#
# Read (b) for what it is: **position-by-position agreement** with one reference, not a
# measure of exposure bias. One inserted or dropped token shifts every later position, so a
# translation that says nearly the same words one place later scores nothing from there on:
# "A man sitting at a table." against the reference "Man sitting at a table." agrees at none
# of the reference's six positions. A different word is not always a wrong one either. The
# gap between (a) and (b) therefore mixes errors that compound after a slip with misalignment
# and with valid rewordings. Curve (c) is the first position at which the greedy output
# leaves the reference, seen over many sentences: it can only fall, and where it falls is
# where free running first parts from the reference (a rewording counts as a departure too).
# To measure exposure bias itself, change only the prefix and keep the position: compare
# the model's loss on the reference's continuation after a prefix it generated with its loss
# after the reference prefix of the same length. BLEU, which counts matching n-grams wherever
# they stand, is the better score of whole translations.

# %%
if not GRADING:
    count = min(500, len(val_de))
    src = multi30k.pad([ids[:127] + [EOS_ID] for ids in tokenizer.encode(val_de[:count])]).to(device)
    tgt = multi30k.pad([[BOS_ID] + ids[:126] + [EOS_ID] for ids in tokenizer.encode(val_en[:count])]).to(device)
    decoder_input, labels = make_teacher_forcing_batch(tgt, PAD_ID)  # labels: (count, T)
    model.eval()
    with torch.no_grad(), autocast():
        forced = model(src, decoder_input).argmax(dim=-1)  # each token predicted from the reference prefix
        free = greedy_decode(model, src, max_len=labels.size(1) + 1, bos_id=BOS_ID, eos_id=EOS_ID)[:, 1:]
    free = F.pad(free, (0, labels.size(1) - free.size(1)), value=PAD_ID)  # greedy may stop early
    real = labels != PAD_ID
    reach = min(50, max(1, count // 4))
    positions = int((real.sum(dim=0) >= reach).sum())  # positions that enough references reach to average
    forced_hits = ((forced == labels) & real).sum(dim=0)[:positions] / real.sum(dim=0)[:positions]
    free_hits = ((free == labels) & real).sum(dim=0)[:positions] / real.sum(dim=0)[:positions]
    # (c): agreeing at every position so far; a reference that has ended counts as agreed with there.
    still = ((free == labels) | ~real).int().cumprod(dim=1).bool() & real
    still_on = still.sum(dim=0)[:positions] / real.sum(dim=0)[:positions]
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    ax.plot(range(1, positions + 1), forced_hits.cpu(), marker=".",
            label="(a) next token, given the reference prefix (teacher forcing)")
    ax.plot(range(1, positions + 1), free_hits.cpu(), marker=".",
            label="(b) greedy output's token at this position")
    ax.plot(range(1, positions + 1), still_on.cpu(), marker=".", linestyle="--",
            label="(c) greedy output still equal to the reference so far")
    ax.set(xlabel="target position", ylabel="share equal to the reference's token", ylim=(0, 1),
           title=f"The same model, {count} validation sentences")
    ax.legend(fontsize=8)
    plt.tight_layout()
    plt.show()
    at = min(10, positions)
    print(f"Notice: at position {at}, the most likely next token given the reference prefix is the reference's in "
          f"{forced_hits[at - 1]:.0%} of sentences; greedy decoding's token at that position is the reference's "
          f"in {free_hits[at - 1]:.0%}; and {still_on[at - 1]:.0%} of the greedy outputs still equal the reference "
          f"at every position up to it. At position 1 both see only <bos>: {forced_hits[0]:.0%} and "
          f"{free_hits[0]:.0%}.")
    pieces = lambda ids: " ".join(tokenizer.id_to_piece(i) for i in ids if i not in (PAD_ID, EOS_ID))  # noqa: E731
    row = min(13, count - 1)
    left = int((~still[row] & real[row]).nonzero()[0, 0]) + 1 if (~still[row] & real[row]).any() else None
    print(f"\nreference:        {pieces(labels[row].tolist())}\nteacher-forced:   {pieces(forced[row][real[row]].tolist())}"
          f"\nits own (greedy): {pieces(free[row].tolist())}\n"
          + (f"greedy leaves the reference at position {left}" if left else "greedy never leaves the reference"))

# %% [markdown]
# ## 13. Decoding faster: caching keys and values
#
# `greedy_decode` runs the decoder over the whole prefix at every step, so step $t$ redoes
# the work of steps $1 \ldots t-1$. It need not: with the causal mask, position $i$'s states
# depend only on tokens $0 \ldots i$, so they never change once computed. Only the new
# position needs a query; the keys and values of earlier positions can be **cached**, one
# set per layer, and each step appends one. (The cross-attention's keys and values come from
# the encoder's output and are computed once.) Training never needs a cache: with teacher
# forcing, every position is computed in one parallel pass.
#
# The cell below decodes with a cache, using the layers' own weights and notebook 02's
# attention function (as the model itself does, so that the two decoders differ only in the
# cache), and compares with your `greedy_decode` on the same sentences.

# %%
from course_blocks import scaled_dot_product_attention, split_heads  # notebooks 02 and 03


@torch.no_grad()
def greedy_decode_cached(model, src: torch.Tensor, max_len: int, bos_id: int, eos_id: int) -> torch.Tensor:
    """greedy_decode with a key/value cache: each step runs the decoder on the newest token only."""
    src_mask = make_padding_mask(src, model.pad_id)  # (B, 1, 1, S)
    memory = model.encode(src, src_mask)
    layers = model.decoder.layers
    cross = [(split_heads(layer.cross_attn.w_k(memory), layer.cross_attn.num_heads),
              split_heads(layer.cross_attn.w_v(memory), layer.cross_attn.num_heads)) for layer in layers]
    cache = [None] * len(layers)  # per layer: keys and values of the positions so far, (B, h, t, d_k) each
    out = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for position in range(max_len - 1):
        x = model.tgt_embed(out[:, -1:]) + model.positional_encoding.pe[position].to(memory.dtype)  # (B, 1, D)
        for i, layer in enumerate(layers):
            attn, h = layer.self_attn, layer.self_attn.num_heads
            k, v = split_heads(attn.w_k(x), h), split_heads(attn.w_v(x), h)
            if cache[i] is not None:  # earlier positions: unchanged, so reuse them
                k, v = torch.cat([cache[i][0], k], dim=2), torch.cat([cache[i][1], v], dim=2)
            cache[i] = (k, v)
            q = split_heads(attn.w_q(x), h)  # the new position is the only query; it may see all of k
            a = scaled_dot_product_attention(q, k, v)[0].transpose(1, 2).reshape(x.shape)
            x = layer.norm1(x + attn.w_o(a))
            q = split_heads(layer.cross_attn.w_q(x), h)
            a = scaled_dot_product_attention(q, *cross[i], mask=src_mask)[0].transpose(1, 2).reshape(x.shape)
            x = layer.norm2(x + layer.cross_attn.w_o(a))
            x = layer.norm3(x + layer.feed_forward(x))
        next_token = model.generator(x[:, -1]).argmax(dim=-1).masked_fill(finished, model.pad_id)
        out = torch.cat([out, next_token[:, None]], dim=1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return out


if not GRADING:
    batch = multi30k.pad([ids + [EOS_ID] for ids in tokenizer.encode(test_de[:200])]).to(device)

    def measure(decode) -> tuple[float, torch.Tensor]:
        """Seconds for one call, after a warm-up call (a GPU's first call loads kernels), with the GPU's
        queue drained before and after (its work runs asynchronously: the clock would stop too soon)."""
        with autocast():
            decode(model, batch[:8], max_len=60, bos_id=BOS_ID, eos_id=EOS_ID)
            if device.type == "cuda":
                torch.cuda.synchronize()
            begin = time.perf_counter()
            ids = decode(model, batch, max_len=60, bos_id=BOS_ID, eos_id=EOS_ID)
            if device.type == "cuda":
                torch.cuda.synchronize()
        return time.perf_counter() - begin, ids

    (slow, slow_ids), (fast, fast_ids) = measure(greedy_decode), measure(greedy_decode_cached)
    same = sum(a == b for a, b in zip(multi30k.decode_ids(tokenizer, slow_ids.cpu()),
                                      multi30k.decode_ids(tokenizer, fast_ids.cpu()), strict=True))
    print(f"{batch.size(0)} test sentences, greedy on {name}: {slow:.2f} s without a cache, {fast:.2f} s with one "
          f"({slow / fast:.1f}x the speed); {same} of {batch.size(0)} translations identical")
    if fast < slow:
        print("Notice: the cache turns each step's cost from the whole prefix into one position; the gain "
              "grows with the length of the output.")
    else:
        print("Notice: here the cache did not pay. It saves arithmetic (the whole prefix at every step); where a "
              "step's time goes to other costs (launching many small operations, for one), the saving does not "
              "show. It grows with longer outputs, bigger batches and bigger models.")

# %% [markdown]
# ## 14. Where the model looks
#
# Forward hooks on every attention module catch its weights for one test sentence: in each
# layer, the encoder's self-attention (German to German), the decoder's masked
# self-attention (English to the English before it) and the cross-attention (English to
# German). The heatmaps show the first and the last layer, each head separately: heads of
# one layer specialise, and the mean over heads hides it; a table below sums up every
# layer. *Look for:* heads that attend to the previous or the same token (a diagonal band),
# heads that spread evenly (context), and, in the cross-attention of the last layer, a
# rough German-to-English alignment.

# %%
if not GRADING:
    example = min(13, len(test_de) - 1)
    src = torch.tensor([tokenizer.encode(test_de[example]) + [EOS_ID]], device=device)
    out = greedy_decode(model, src, max_len=min(40, CONFIG.max_output_len), bos_id=BOS_ID, eos_id=EOS_ID)
    kinds = {"encoder self-attention": [layer.self_attn for layer in model.encoder.layers],
             "decoder self-attention": [layer.self_attn for layer in model.decoder.layers],
             "cross-attention": [layer.cross_attn for layer in model.decoder.layers]}
    drawn = sorted({0, CONFIG.num_layers - 1})  # the first and the last layer (every layer's entropy is printed)
    caught = {}  # (kind, layer) -> weights (1, h, queries, keys)
    hooks = [module.register_forward_hook(lambda module, args, output, key=(kind, i): caught.__setitem__(key, output[1]))
             for kind, modules in kinds.items() for i, module in enumerate(modules)]
    with torch.no_grad():
        model(src, out[:, :-1] if out[0, -1] == EOS_ID else out)
    for hook in hooks:
        hook.remove()
    src_pieces = [tokenizer.id_to_piece(i) for i in src[0].tolist()]
    out_pieces = [tokenizer.id_to_piece(i) for i in out[0, : caught["cross-attention", 0].size(2)].tolist()]
    labels = {"encoder self-attention": (src_pieces, src_pieces), "decoder self-attention": (out_pieces, out_pieces),
              "cross-attention": (out_pieces, src_pieces)}
    heads = CONFIG.num_heads
    rows = [(key, weights) for key, weights in caught.items() if key[1] in drawn]
    fig, axes = plt.subplots(len(rows), heads, figsize=(2.2 * heads, 2.4 * len(rows)), squeeze=False)
    for row, ((kind, layer), weights) in enumerate(rows):
        queries, keys = labels[kind]
        for head in range(heads):
            ax = axes[row, head]
            sns.heatmap(weights[0, head].float().cpu(), ax=ax, cmap="viridis", vmin=0, vmax=1, cbar=False,
                        xticklabels=keys, yticklabels=queries if head == 0 else False)
            ax.tick_params(labelsize=4)
            ax.set(title=f"{kind}, layer {layer + 1}, head {head}" if head == 0 else f"head {head}",
                   xlabel="key", ylabel="query" if head == 0 else "")
            ax.title.set_fontsize(7)
    plt.tight_layout()
    plt.show()
    entropy = {key: (-(w.float().clamp_min(1e-9).log() * w.float()).sum(-1)).mean(dim=(0, 2))
               for key, w in caught.items()}  # per head, in nats: low = sharp
    print("Mean entropy of each head's rows, in nats (0: every query looks at one key; "
          f"uniform over {len(src_pieces)} source tokens: {math.log(len(src_pieces)):.2f}):")
    for (kind, layer), e in entropy.items():
        print(f"  {kind:>22}, layer {layer + 1}: " + " ".join(f"{v:.2f}" for v in e.tolist()))
    sharpest = min(entropy, key=lambda key: float(entropy[key].min()))
    print(f"Notice: the sharpest head is in the {sharpest[0]} of layer {sharpest[1] + 1}; the decoder's "
          "self-attention is lower-triangular in every layer and head: the causal mask at work.")

# %% [markdown]
# ## What to try next
#
# - Pre-LN layers (`norm_first`): trains with a shorter warm-up and higher rates.
# - Checkpoint averaging (the paper, section 6.1, averages the last 5 or 20 checkpoints of a long
#   run): the `gpu` configuration already tries it (`average=5`) and keeps the mean only when its
#   validation loss is lower, which in the course's three `gpu` runs it never was. The paper's
#   base models averaged checkpoints written 10 minutes apart at the end of 12 hours of training;
#   ours are 30 seconds apart in a 7- to 10-minute run, a different regime, so the gain is not
#   automatic. Try it on a longer run, and judge it on the validation loss.

# %% [markdown]
# ## In your own words
#
# Answer in a few sentences each, in the cell below each question; where a question asks for your own
# numbers, quote them from your run. These answers are graded by hand.

# %% [markdown]
# **Question 1** (3 points). Read your training curves (section 11). At which evaluation was the
# validation loss lowest, what did the training and validation losses do after it (if it was not
# the last), and what does that say about your run? Which weights does the rest of the notebook
# use, and why?

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_your_curves", "locked": false, "points": 3, "schema_version": 3, "solution": true}
# In my run (`cpu`), the validation loss was lowest at the fifth and last evaluation (2.697), after a
# fifth epoch the 10-minute budget cut short (237 of 287 batches). It fell at every evaluation, and the
# training loss fell too (its last figure, 2.189, is the mean of those 237 late batches, not of a whole
# epoch like the four before it). So the model had not begun to over-fit: the time ran out first, and
# more training would likely help. Early stopping keeps the weights of the lowest validation loss, here
# also the last ones, and the rest of the notebook uses them: the validation loss is measured on
# sentences the model never trained on, so it is the better guide to how it does on new ones.

# %% [markdown]
# **Question 2** (2 points). In your run, how much did beam search change the validation BLEU over
# greedy decoding, and how many translations did it change? Why does beam search need a length penalty?

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_beam", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# In my run, on the validation set, beam 4 changed 636 of 1,014 translations and raised BLEU by 1.11
# (34.50 to 35.61), in 2.2 times greedy's decoding time (both batched). A hypothesis's score $\log P(Y)$
# is a sum of negative terms, so every
# extra token lowers it: without a correction, search prefers short hypotheses that end early.
# Dividing by the GNMT penalty $((5 + |Y|)/6)^{\alpha}$ compares hypotheses of different lengths more
# fairly.
