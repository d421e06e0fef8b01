# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Scaled dot-product attention
#
# Notebook 01 built $\mathrm{softmax}(QK^\top)V$. The Transformer uses one small change
# and one addition (Vaswani et al., 2017, section 3.2.1, equation 1):
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V,$$
#
# plus a **mask** that says which keys each query may look at (padding, or the future
# in a decoder). This notebook shows *why* the $1/\sqrt{d_k}$ is there, then you write
# the function every later notebook uses.
#
# **Exercise:** `scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0)`
# returning `(output, weights)`.
#
# Here you may use `torch.softmax`; notebook 01 was where you wrote it by hand.

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
        "02_scaled_dot_product"
    )
    PROVIDED = []  # modules shipped beside this notebook (none for notebook 02)
    missing = [p for p in ("torch", "matplotlib", "seaborn") if importlib.util.find_spec(p) is None]
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
import math

import matplotlib.pyplot as plt
import seaborn as sns
import torch
import torch.nn.functional as F

torch.manual_seed(0)
sns.set_theme(style="whitegrid", palette="colorblind")

# %% [markdown]
# ## 1. Why scale by $\sqrt{d_k}$
#
# Take a query and a key whose $d_k$ components are independent with mean 0 and
# variance 1. Their dot product $q\cdot k = \sum_{t=1}^{d_k} q_t k_t$ is a sum of $d_k$
# terms of variance 1, so its **variance is $d_k$** and its typical size $\sqrt{d_k}$.
# At $d_k = 512$ one standard deviation is $\sqrt{512} \approx 22.6$, so scores beyond ±20 are
# common and beyond ±45 not rare; softmax of such scores is nearly one-hot
# (*saturated*), and its gradient, $\partial p_i / \partial s_j = p_i(\delta_{ij} - p_j)$,
# is nearly zero everywhere: the model stops learning where to look. Dividing by
# $\sqrt{d_k}$ brings the variance back to 1 whatever $d_k$ is.
#
# The plot measures both effects on random vectors: the variance of the scores, and the
# largest softmax weight over 16 keys (1/16 would be uniform; 1 is one-hot).
#
# *Predict, then run:* at $d_k = 1024$, without the scale, how large is the typical
# largest weight over 16 keys: near 1/16, near 1/2, or near 1?

# %%
dims = [4, 16, 64, 256, 1024]
n_keys, n_samples = 16, 2000
rows = {"variance": {"unscaled": [], "scaled": []}, "max weight": {"unscaled": [], "scaled": []}}
for d_k in dims:
    q = torch.randn(n_samples, 1, d_k)
    k = torch.randn(n_samples, n_keys, d_k)
    raw = (q @ k.transpose(-2, -1)).squeeze(1)  # (n_samples, n_keys)
    for name, s in (("unscaled", raw), ("scaled", raw / math.sqrt(d_k))):
        rows["variance"][name].append(s.var().item())
        rows["max weight"][name].append(torch.softmax(s, dim=-1).amax(dim=-1).mean().item())

fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for ax, (metric, series) in zip(axes, rows.items(), strict=True):
    for name, values in series.items():
        ax.plot(dims, values, marker="o", label=f"{name}" + (" / sqrt(d_k)" if name == "scaled" else ""))
    ax.set(xscale="log", xlabel="d_k", ylabel=metric)
    ax.set_xticks(dims, [str(d) for d in dims])
    ax.legend()
axes[0].set(yscale="log", title="Variance of q·k grows like d_k")
axes[1].set(title=f"Softmax saturates (max of {n_keys} weights)")
plt.tight_layout()
plt.show()
for d_k, unscaled, scaled in zip(dims, rows["max weight"]["unscaled"], rows["max weight"]["scaled"], strict=True):
    print(f"d_k = {d_k:4d}: largest of {n_keys} weights, mean over samples: unscaled {unscaled:.2f}, scaled {scaled:.2f}")
print("Notice: unscaled, the variance equals d_k and softmax approaches one-hot; scaled, both "
      "stay flat.")

# %% [markdown]
# ## 2. Masks: `True` means attend
#
# A mask is a boolean tensor that broadcasts against the scores `(..., Lq, Lk)`:
# **`True` = this query may look at this key, `False` = blocked**. Blocked scores are
# set to $-\infty$ before softmax, so their weight is exactly $e^{-\infty} = 0$.
#
# This is the convention of `F.scaled_dot_product_attention` and of every notebook in
# this course. Beware: `nn.MultiheadAttention(key_padding_mask=...)` uses the
# **opposite** one (`True` = ignore). Mixing the two up silently attends to exactly the
# wrong positions.
#
# Two cases need care:
# - **A fully blocked row** (a query that may see nothing) is all $-\infty$, and softmax
#   of that is `0/0 = NaN`, which would spread through the whole network. Such a row must
#   return weights 0 and output 0. Padding masks block *keys* (notebook 04), and every real
#   sentence has at least one real token, so ordinary batches never produce such a row; it
#   appears when a mask also blocks padding *queries*, when a batch slot holds no token at
#   all, or when several restrictions are combined (a causal mask and a window that ends
#   before the query, say). A function used everywhere must handle it.
# - **A large negative fill** such as `-1e9` instead of $-\infty$ avoids the NaN but gives
#   a fully blocked row *uniform* weights, so it attends to everything. Zero those rows.
#
# One way handles both: after the softmax, set every blocked weight to 0 with the mask again.
# A fully blocked row has only blocked entries, so it becomes all zeros, whatever the softmax
# gave there.
#
# The gradient needs the same care as the forward pass, since a NaN in a gradient spreads to
# every parameter at the next optimiser step. Softmax over an all $-\infty$ row has a NaN
# gradient too. How the mask reaches the scores decides whether that NaN goes further back:
# `masked_fill` (or `torch.where`) *replaces* the blocked scores, and a replaced entry passes no
# gradient back to what it replaced, so the NaN stops there. *Adding* a mask of $0$ and
# $-\infty$ to the scores passes the gradient through unchanged, NaN included, to the queries
# and keys, even when the forward pass was repaired afterwards. The cell below shows both.

# %%
def _blocked_row_gradient(how: str) -> torch.Tensor:
    query, key = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4)
    keep = torch.tensor([[True, True, False], [False, False, False], [True, False, True]])
    scores = query @ key.T / 2.0  # row 1: a query that may attend to nothing
    if how == "replace":
        scores = scores.masked_fill(~keep, float("-inf"))
    else:  # "add": a 0 / -inf mask added to the scores
        scores = scores + torch.zeros(3, 3).masked_fill(~keep, float("-inf"))
    weights = torch.nan_to_num(scores.softmax(dim=-1))  # the forward pass is repaired in both
    (weights @ torch.randn(3, 5)).square().sum().backward()
    return query.grad


for how in ("replace", "add"):
    grad = _blocked_row_gradient(how)
    print(f"{how:7s}: gradient of the queries finite everywhere? {torch.isfinite(grad).all().item()}; "
          f"its row 1: {grad[1].tolist()}")

# %% [markdown]
# ## 3. Dropout on the weights
#
# The paper's dropout (§5.4) goes on the output of every sub-layer and on the sums of
# embeddings and positional encodings; dropout on the attention weights themselves is a
# common addition (tensor2tensor has it, and so does PyTorch's built-in). With
# `dropout_p > 0`, drop each weight with probability `p` and scale the rest by
# `1/(1-p)` (that is what `F.dropout` does), so the expected output is unchanged. Like
# the PyTorch built-in, the function applies dropout whenever `dropout_p > 0`; a model
# passes `0.0` in evaluation. The weights it returns are those after dropout: with
# `dropout_p > 0` a row no longer sums to 1 (its expected sum still is).
#
# **Exercise.** Write `scaled_dot_product_attention`:
# - `query (..., Lq, d_k)`, `key (..., Lk, d_k)`, `value (..., Lk, d_v)`, any leading axes;
# - `mask`: `None` or bool, broadcastable to `(..., Lq, Lk)`, `True` = attend;
# - returns `(output (..., Lq, d_v), weights (..., Lq, Lk))`; blocked weights exactly 0;
#   fully blocked rows give zeros, never NaN, and finite gradients.

# %% [markdown]
# **Stuck on `scaled_dot_product_attention`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.2.1, Eq. (1), and §3.2.3 for masking.
#
# <details><summary>Hint 1: a nudge</summary>
#
# Four steps: scale the scores, block what the mask forbids, softmax over keys, mix the values. Then deal with rows where nothing is allowed.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Divide the scores by $\sqrt{d_k}$ so their spread does not grow with the dimension. Where `mask` is `False`, replace the score by `-inf` before the softmax so those keys get weight 0. A row with every key blocked is all `-inf`, and its softmax is NaN: after the softmax, use the mask once more to set every blocked weight to 0, which empties such rows too. Replace the blocked scores rather than adding `-inf` to them, so that no NaN reaches the gradient (section 2). Dropout goes on the weights, only when `dropout_p > 0`.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# $\mathrm{softmax}(QK^\top/\sqrt{d_k})\,V$, with $d_k$ the last size of `query`
# (`math.sqrt`). Look up `Tensor.masked_fill(condition, value)`: it returns a copy with `value`
# wherever `condition` is `True`, so the condition here is `~mask` (the blocked places), with
# `float("-inf")` on the scores and `0.0` on the weights. Then `torch.softmax(..., dim=-1)` and
# `F.dropout` with probability `dropout_p` on the weights. Shapes: scores and weights `(..., Lq, Lk)`, output
# `(..., Lq, d_v)`.
#
# </details>
#
# **Check yourself:** Why not fill blocked positions with `-1e9` instead of `-inf`?
#
# <details><summary>Answer</summary>
#
# For a row where every key is blocked, `-1e9` everywhere gives uniform weights, so the query attends to padding; `-inf` plus zeroing gives exactly 0, which is what the mask means.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "scaled_dot_product_attention", "locked": false, "schema_version": 3, "solution": true}
def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention, Vaswani et al. (2017) eq. 1.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.
        value: ``(..., Lk, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., Lq, Lk)``; True = may attend.
        dropout_p: dropout probability on the weights, applied whenever > 0.

    Returns:
        ``(output (..., Lq, d_v), weights (..., Lq, Lk))``.
    """
    ### BEGIN SOLUTION
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # Fully blocked rows are softmax(all -inf) = NaN: zero them with the blocked entries.
        weights = weights.masked_fill(~mask, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ value, weights  # (..., Lq, d_v), (..., Lq, Lk)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_scaled_dot_product_attention_shapes", "locked": true, "points": 1, "schema_version": 3, "solution": false}
q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 6)
out, weights = scaled_dot_product_attention(q, k, v)
assert out.shape == (2, 3, 4, 6), f"output: expected (..., Lq, d_v) = (2, 3, 4, 6), got {tuple(out.shape)}"
assert weights.shape == (2, 3, 4, 5), f"weights: expected (..., Lq, Lk) = (2, 3, 4, 5), got {tuple(weights.shape)}"
assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 4), atol=1e-5), "weights should sum to 1 over keys"
# A worked example: d_k = 4, so the scores [4, 0] become [2, 0] after scaling.
q1 = torch.tensor([[[1.0, 1.0, 1.0, 1.0]]])
k1 = torch.tensor([[[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]])
v1 = torch.tensor([[[1.0], [0.0]]])
_, w1 = scaled_dot_product_attention(q1, k1, v1)
expected_w1 = torch.softmax(torch.tensor([2.0, 0.0]), dim=0)
assert torch.allclose(w1[0, 0], expected_w1, atol=1e-6), (
    f"expected weights {expected_w1.tolist()} (scores [4, 0] / sqrt(4)), got {w1[0, 0].tolist()}"
)
print("scaled_dot_product_attention: shape tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_scaled_dot_product_attention_values", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): values and gradients against a reference, several
# shapes and dtypes, no mask.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb02 as _checks

_checks.check_values(globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_scaled_dot_product_attention_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false}
q, k, v = torch.randn(1, 3, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4)
causal = torch.ones(3, 3, dtype=torch.bool).tril()  # True on and below the diagonal
out, weights = scaled_dot_product_attention(q, k, v, mask=causal)
assert (weights[0][~causal] == 0).all(), (
    "blocked positions (mask False) must get weight exactly 0; is True = attend?"
)
assert torch.allclose(weights[0, 0], torch.tensor([1.0, 0.0, 0.0])), (
    "query 0 may only see key 0, so its weights should be [1, 0, 0]"
)
assert torch.allclose(out[0, 0], v[0, 0], atol=1e-6), "query 0's output should be value 0"
print("scaled_dot_product_attention: mask tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_scaled_dot_product_attention_mask_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): padding, causal and full masks of every broadcast
# shape the course uses, against a reference.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb02 as _checks

_checks.check_mask(globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_scaled_dot_product_attention_fully_masked", "locked": true, "points": 1, "schema_version": 3, "solution": false}
mask = torch.tensor([[True, True], [False, False]])  # query 1 may attend to nothing
q, k, v = (torch.randn(2, size, requires_grad=True) for size in (4, 4, 3))
out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
assert not torch.isnan(weights).any() and not torch.isnan(out).any(), (
    "a fully blocked row gave NaN: softmax over all -inf is NaN; set such rows to 0"
)
assert (weights[1] == 0).all() and (out[1] == 0).all(), (
    f"a fully blocked row must give zero weights and output, got weights {weights[1].tolist()} "
    "(a finite fill such as -1e9 spreads the weight uniformly instead: zero such rows after the softmax)"
)
out.square().sum().backward()
assert all(t.grad is not None for t in (q, k, v)), "no gradient reaches the inputs: do not detach them"
assert all(torch.isfinite(t.grad).all() for t in (q, k, v)), (
    "a fully blocked row gives NaN gradients: replace the blocked scores (masked_fill or torch.where) "
    "instead of adding -inf to them"
)
### BEGIN HIDDEN TESTS
from course_reference.checks import nb02 as _checks

_checks.check_fully_masked(globals())
### END HIDDEN TESTS
print("scaled_dot_product_attention: fully-blocked-row tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_scaled_dot_product_attention_dropout", "locked": true, "points": 1, "schema_version": 3, "solution": false}
q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
assert torch.equal(scaled_dot_product_attention(q, k, v, dropout_p=0.0)[0], scaled_dot_product_attention(q, k, v)[0]), (
    "dropout_p=0.0 must change nothing"
)
### BEGIN HIDDEN TESTS
from course_reference.checks import nb02 as _checks

_checks.check_dropout(globals())
### END HIDDEN TESTS
print("scaled_dot_product_attention: dropout tests passed")

# %% [markdown]
# ## 4. Compare with `F.scaled_dot_product_attention`
#
# PyTorch's built-in computes the same output (it returns no weights) with fused
# kernels. Its boolean `attn_mask` uses the same `True` = attend convention.

# %%
q, k, v = torch.randn(2, 4, 6, 16), torch.randn(2, 4, 7, 16), torch.randn(2, 4, 7, 16)
mask = torch.rand(2, 1, 6, 7) > 0.3
mask[..., 0] = True  # at least one key per row (fully blocked rows have their own test above)
for label, m in (("no mask", None), ("bool mask", mask)):
    mine, _ = scaled_dot_product_attention(q, k, v, mask=m)
    builtin = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    print(f"{label:9s}: max |mine - built-in| = {(mine - builtin).abs().max().item():.2e}")

# %% [markdown]
# ## 5. What a mask does to the weights
#
# A causal mask (each position sees itself and the past) on a 6-token sentence whose last
# two positions are padding, blocked as keys. Queries and keys are different random
# vectors, so a weight near 0 that the mask allowed can be told apart from a blocked one.

# %%
tokens = ["ich", "bin", "ein", "Berliner", "<pad>", "<pad>"]
length = len(tokens)
real = torch.tensor([True, True, True, True, False, False])
causal = torch.ones(length, length, dtype=torch.bool).tril()
mask = causal & real[None, :]  # (L, L): query i may see key j <= i, if j is a real token
query, key = torch.randn(1, length, 16), torch.randn(1, length, 16)
_, weights = scaled_dot_product_attention(query, key, torch.randn(1, length, 16), mask=mask)

fig, axes = plt.subplots(1, 2, figsize=(10, 4))
sns.heatmap(mask.int(), cmap="Greys", cbar=False, annot=True, fmt="d", ax=axes[0],
            xticklabels=tokens, yticklabels=tokens)
axes[0].set(title="mask (1 = may attend)", xlabel="key", ylabel="query")
sns.heatmap(weights[0], cmap="viridis", vmin=0, vmax=1, annot=True, fmt=".2f", ax=axes[1],
            xticklabels=tokens, yticklabels=tokens, cbar_kws={"label": "weight"})
axes[1].set(title="attention weights", xlabel="key", ylabel="query")
plt.tight_layout()
plt.show()
print("Notice: the upper triangle and the padding columns are exactly 0; every row sums to 1. "
      "The padding rows still attend to the real tokens: their outputs are computed, then ignored "
      "by the loss.")

# %% [markdown]
# ## In your own words
#
# Answer in a few sentences each, in the cell below each question; where a question asks for your own
# numbers, quote them from your run. These answers are graded by hand.

# %% [markdown]
# **Question 1** (2 points). From the numbers printed under your plot in section 1: at $d_k = 1024$,
# what was the typical largest softmax weight over 16 keys without the scale, and with it? Why does a weight that close to
# 1 stop the model from learning where to look?

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_scale", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# In my run, about 0.96 without the scale and about 0.25 with it (1/16 = 0.06 would be uniform).
# Unscaled scores have variance $d_k = 1024$ (a standard deviation of 32), so one key wins by a wide
# margin and the softmax is nearly one-hot. Its gradient $\partial p_i / \partial s_j =
# p_i(\delta_{ij} - p_j)$ is then nearly zero everywhere (every $p$ is close to 0 or 1), so the loss
# sends almost no signal back to the scores: the queries and keys stop changing. Dividing by
# $\sqrt{d_k}$ brings the variance back to 1.

# %% [markdown]
# **Question 2** (2 points). The mask sets blocked scores to $-\infty$ *before* the softmax. Why not
# compute the softmax first and set the blocked weights to 0 afterwards? What would go wrong, for
# example for a padded sentence?

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_mask_before_softmax", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# $e^{-\infty} = 0$, so a blocked key gets exactly zero weight and the softmax renormalises over the
# allowed keys: each row still sums to 1. Zeroing after the softmax removes the blocked keys' share
# without renormalising, so rows sum to less than 1 and the output shrinks by that share. The loss
# depends on the masked positions: a padded sentence's outputs would change with the amount of
# padding, i.e. with the longest sentence in its batch.
