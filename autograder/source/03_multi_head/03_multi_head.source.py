# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Multi-head attention
#
# One attention layer gives each query **one** set of weights: one way of deciding which
# other words matter. But a word relates to others in several ways at once: a verb to its
# subject, a pronoun to the noun it refers to, a word to its neighbours. Multi-head
# attention runs $h$ smaller attentions side by side, each with its own projections, and
# concatenates what they find (Vaswani et al., 2017, section 3.2.2):
#
# $$\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\,W^O,
#   \qquad \mathrm{head}_i = \mathrm{Attention}(QW_i^Q, KW_i^K, VW_i^V).$$
#
# Each head works in $d_k = d_{model}/h$ dimensions, so all $h$ heads together cost about
# as much as one full-size head. In code, the $h$ small projections are one big
# `nn.Linear(d_model, d_model)` whose output is cut into $h$ slices.
#
# **Exercises:** `split_heads`, `combine_heads`, `MultiHeadAttention`.
# The attention itself comes from notebook 02: `course_blocks.py` (shipped beside this
# notebook) holds the course's reference code of the earlier notebooks.

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
        "03_multi_head"
    )
    PROVIDED = ["course_blocks.py"]  # reference code of notebooks 01-02
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
import time

import matplotlib.pyplot as plt
import seaborn as sns
import torch
from course_blocks import scaled_dot_product_attention
from torch import nn

torch.manual_seed(0)
sns.set_theme(style="white", palette="colorblind")

# %% [markdown]
# ## 1. Splitting into heads
#
# After the projection, each position holds one vector of size $D = h \cdot d_k$: head 0
# owns features `0:d_k`, head 1 owns `d_k:2d_k`, and so on. To run the heads as a batch,
# we want the layout `(B, h, L, d_k)`.
#
# The right way is two steps: `view(B, L, h, d_k)` cuts **each position's** vector into
# $h$ slices, then `transpose(1, 2)` moves the head axis in front of the positions.
#
# The tempting shortcut `view(B, h, L, d_k)` has the right *shape* but the wrong
# *content*: `view` only re-reads memory in order, so "head 0" would receive the first
# $L \cdot d_k$ numbers, which are the whole vectors of the first few positions. Look:

# %%
x_demo = torch.arange(12.0).view(1, 3, 4)  # B=1, L=3 positions, D=4; position p holds 4p..4p+3
print("x (rows = positions):\n", x_demo[0])
print("right: view(B, L, h, d_k).transpose(1, 2), head 0:\n", x_demo.view(1, 3, 2, 2).transpose(1, 2)[0, 0])
print("wrong: view(B, h, L, d_k), head 0:\n", x_demo.view(1, 2, 3, 2)[0, 0])
print("Head 0 should hold features 0:2 of every position; the wrong one mixes positions.")

# %% [markdown]
# **Exercise 1.** Write `split_heads(x, num_heads)`: `(B, L, D)` -> `(B, h, L, d_k)`.

# %% [markdown]
# **Stuck on `split_heads`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.2.2 (each head works on $d_k = d_{model}/h$ features).
#
# <details><summary>Hint 1: a nudge</summary>
#
# Two moves: cut the feature axis into `num_heads` pieces, then bring the head axis in front of the sequence axis.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Reshape `(B, L, D)` to `(B, L, h, D/h)`, then swap axes 1 and 2 to get `(B, h, L, D/h)`. Reshaping straight to `(B, h, L, D/h)` mixes positions into heads.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Read `B, L, D` from `x.shape`. Look up `Tensor.view` (or `Tensor.reshape`), which takes the new
# sizes, and `Tensor.transpose(dim0, dim1)`. The shapes to pass through: `(B, L, D)`, then
# `(B, L, h, d_k)`, then `(B, h, L, d_k)`, with `d_k = D // h`.
#
# </details>
#
# **Check yourself:** For `x` of shape `(2, 5, 12)` and 3 heads, which slice of `x` ends up as head 1 of position 4?
#
# <details><summary>Answer</summary>
#
# `x[:, 4, 4:8]`: head $i$ owns features $i \cdot d_k$ to $(i+1) \cdot d_k - 1$ of every position.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "split_heads", "locked": false, "schema_version": 3, "solution": true}
def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut each position's vector into ``num_heads`` slices, heads first.

    Args:
        x: ``(B, L, D)`` with ``D`` divisible by ``num_heads``.
        num_heads: ``h``.

    Returns:
        ``(B, h, L, d_k)`` with ``d_k = D // h``; ``out[b, i, p] = x[b, p, i*d_k:(i+1)*d_k]``.
    """
    ### BEGIN SOLUTION
    batch, length, d_model = x.shape
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)  # (B, h, L, d_k)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_split_heads", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = torch.randn(2, 5, 12)
heads = split_heads(x, 3)
assert heads.shape == (2, 3, 5, 4), f"expected (B, h, L, d_k) = (2, 3, 5, 4), got {tuple(heads.shape)}"
assert torch.equal(heads[1, 2, 3], x[1, 3, 8:12]), (
    "head 2 of position 3 should be features 8:12 of that position's vector; did you view(B, h, L, d_k)?"
)
print("split_heads: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_split_heads_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): random shapes incl. one head, length 1 and d_k = 1.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb03 as _checks

_checks.check_split_heads(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 2. Putting the heads back together
#
# After attention, each head returns `(B, h, L, d_k)`. Concatenating the heads per
# position is the inverse: `transpose(1, 2)` to `(B, L, h, d_k)`, then merge the last two
# axes into `D`.
#
# One catch: `transpose` does not move any data; it only swaps the *strides* (how far to
# jump in memory per index step). The result is **non-contiguous**, and `view` refuses
# it because it cannot re-read non-adjacent memory as one axis. Call `.contiguous()` (which
# copies into the new order) before `view`, or use `reshape`, which copies only when it
# must.

# %%
t = torch.randn(2, 3, 5, 4).transpose(1, 2)  # (B, L, h, d_k) view of a (B, h, L, d_k) tensor
print("contiguous after transpose?", t.is_contiguous(), "| strides:", t.stride())
try:
    t.view(2, 5, 12)
except RuntimeError as err:
    print("view fails:", str(err)[:80], "...")
print("after .contiguous():", t.contiguous().view(2, 5, 12).shape)

# %% [markdown]
# **Exercise 2.** Write `combine_heads(x)`: `(B, h, L, d_k)` -> `(B, L, h * d_k)`.

# %% [markdown]
# **Stuck on `combine_heads`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.2.2, the Concat in the MultiHead equation.
#
# <details><summary>Hint 1: a nudge</summary>
#
# Undo `split_heads` in reverse order.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Swap the head and sequence axes back to `(B, L, h, d_k)`, then merge the last two axes. After a transpose the memory is not laid out for `view`: use `.contiguous().view(...)` or `.reshape(...)`.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Read `B, h, L, d_k` from `x.shape`. The shapes to pass through: `(B, h, L, d_k)`, then
# `(B, L, h, d_k)`, then `(B, L, h * d_k)`. Look up `Tensor.transpose`, and `Tensor.reshape`
# (or `Tensor.contiguous` followed by `Tensor.view`, or `Tensor.flatten(start_dim)`).
#
# </details>
#
# **Check yourself:** What does `combine_heads(split_heads(x, h))` return?
#
# <details><summary>Answer</summary>
#
# `x` itself, exactly: the two functions are inverses, and the visible test checks that.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "combine_heads", "locked": false, "schema_version": 3, "solution": true}
def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads of each position (inverse of ``split_heads``).

    Args:
        x: ``(B, h, L, d_k)``.

    Returns:
        ``(B, L, h * d_k)``.
    """
    ### BEGIN SOLUTION
    batch, num_heads, length, d_k = x.shape
    return x.transpose(1, 2).contiguous().view(batch, length, num_heads * d_k)  # (B, L, D)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_combine_heads", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def _test_combine_heads():
    x = torch.randn(2, 5, 12)
    merged = combine_heads(split_heads(x, 3))
    assert merged.shape == (2, 5, 12), f"expected (B, L, D) = (2, 5, 12), got {tuple(merged.shape)}"
    assert torch.equal(merged, x), "combine_heads(split_heads(x, h)) should give x back exactly"
    heads = torch.randn(2, 3, 5, 4)  # as attention returns it: a fresh, contiguous (B, h, L, d_k) tensor
    merged = combine_heads(heads)
    assert torch.equal(merged[1, 4, 8:12], heads[1, 2, 4]), "position 4, features 8:12 should be head 2's output"


### BEGIN HIDDEN TESTS
from course_reference.checks import isolate as _isolate
from course_reference.checks import nb03 as _checks

_test_combine_heads = _isolate(globals(), _test_combine_heads, **_checks.upstream("split_heads"))
### END HIDDEN TESTS
_test_combine_heads()
print("combine_heads: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_combine_heads_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): random shapes and dtypes, non-contiguous inputs.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb03 as _checks

_checks.check_combine_heads(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 3. The module
#
# `MultiHeadAttention` holds four `nn.Linear(d_model, d_model)` layers: `w_q`, `w_k`,
# `w_v` (all heads' projections at once) and `w_o` (the output projection $W^O$). Its
# forward pass:
#
# 1. project: `self.w_q(query)`, `self.w_k(key)`, `self.w_v(value)`, each `(B, L, D)`;
# 2. `split_heads` each to `(B, h, L, d_k)`;
# 3. `scaled_dot_product_attention(q, k, v, mask, dropout_p)` (from `course_blocks`); the
#    mask broadcasts against `(B, h, Lq, Lk)`;
# 4. `combine_heads` and apply `w_o`.
#
# Return the output `(B, Lq, D)` **and** every head's weights `(B, h, Lq, Lk)`. Use
# dropout on the weights only in training mode: `self.dropout if self.training else 0.0`.
# Query and key/value may have different lengths (cross-attention in the decoder).
#
# **Exercise 3.** Complete `MultiHeadAttention`: raise `ValueError` in `__init__` when
# `d_model` is not divisible by `num_heads`, and write `forward`. Keep the names `w_q`,
# `w_k`, `w_v`, `w_o`: the grader copies reference weights into them.

# %% [markdown]
# **Stuck on `MultiHeadAttention`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.2.2, the MultiHead equation and Figure 2.
#
# <details><summary>Hint 1: a nudge</summary>
#
# Project, split, attend, combine, project again: every step is a function you already have.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Apply `w_q`, `w_k`, `w_v` to query, key and value; `split_heads` each; call `scaled_dot_product_attention` with the mask (it broadcasts over heads) and dropout only in training; `combine_heads`; finish with `w_o`.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# The shapes to pass through: the projections `(B, Lq, D)` and `(B, Lk, D)`; after
# `split_heads`, `(B, h, Lq, d_k)` and `(B, h, Lk, d_k)`; `scaled_dot_product_attention` returns
# `(B, h, Lq, d_k)` and the weights `(B, h, Lq, Lk)`; `combine_heads` gives `(B, Lq, D)` and
# `w_o` keeps it. `self.training` (set by `.train()` and `.eval()`) tells which dropout
# probability to pass: `self.dropout` or `0.0`. In `__init__`, `%` gives the remainder.
#
# </details>
#
# **Check yourself:** The output has shape `(B, Lq, D)`. What shape do the returned weights have?
#
# <details><summary>Answer</summary>
#
# `(B, h, Lq, Lk)`: one attention map per head.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "MultiHeadAttention", "locked": false, "schema_version": 3, "solution": true}
class MultiHeadAttention(nn.Module):
    """Multi-head attention, Vaswani et al. (2017) section 3.2.2, batch-first.

    Args:
        d_model: model size ``D``.
        num_heads: number of heads ``h``; ``d_k = D // h``.
        dropout: dropout probability on the attention weights (training mode only).
        bias: whether the projections have biases.

    Shape:
        forward(query ``(B, Lq, D)``, key ``(B, Lk, D)``, value ``(B, Lk, D)``, mask bool
        broadcastable to ``(B, h, Lq, Lk)`` with True = attend)
        -> ``(out (B, Lq, D), weights (B, h, Lq, Lk))``.

    Raises:
        ValueError: if ``d_model % num_heads != 0``.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        # Your part of __init__: refuse a d_model that the heads cannot share equally.
        ### BEGIN SOLUTION
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        ### END SOLUTION

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ### BEGIN SOLUTION
        q = split_heads(self.w_q(query), self.num_heads)  # (B, h, Lq, d_k)
        k = split_heads(self.w_k(key), self.num_heads)  # (B, h, Lk, d_k)
        v = split_heads(self.w_v(value), self.num_heads)  # (B, h, Lk, d_k)
        dropout_p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(q, k, v, mask=mask, dropout_p=dropout_p)
        return self.w_o(combine_heads(out)), weights  # (B, Lq, D), (B, h, Lq, Lk)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_MultiHeadAttention", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def _test_MultiHeadAttention():
    mha = MultiHeadAttention(16, 4)
    q, kv = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    out, weights = mha(q, kv, kv)
    assert out.shape == (2, 5, 16), f"output: expected (B, Lq, D) = (2, 5, 16), got {tuple(out.shape)}"
    assert weights.shape == (2, 4, 5, 7), (
        f"weights: expected every head's, (B, h, Lq, Lk) = (2, 4, 5, 7), got {tuple(weights.shape)}"
    )
    assert isinstance(mha.w_o, nn.Linear), "keep the attribute names w_q, w_k, w_v, w_o"
    try:
        MultiHeadAttention(10, 3)
    except ValueError:
        pass
    else:
        raise AssertionError("MultiHeadAttention(10, 3) should raise ValueError (10 % 3 != 0)")
    # One head with identity projections is plain scaled dot-product attention.
    one = MultiHeadAttention(8, 1, bias=False)
    for layer in (one.w_q, one.w_k, one.w_v, one.w_o):
        nn.init.eye_(layer.weight)
    x = torch.randn(1, 4, 8)
    expected, _ = scaled_dot_product_attention(x, x, x)
    assert torch.allclose(one(x, x, x)[0], expected, atol=1e-5), (
        "with one head and identity weights the output should equal scaled_dot_product_attention(x, x, x)"
    )


### BEGIN HIDDEN TESTS
from course_reference.checks import isolate as _isolate
from course_reference.checks import nb03 as _checks

_test_MultiHeadAttention = _isolate(
    globals(), _test_MultiHeadAttention, **_checks.upstream("split_heads", "combine_heads")
)
### END HIDDEN TESTS
_test_MultiHeadAttention()
print("MultiHeadAttention: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_MultiHeadAttention_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): reference weights copied into w_q, w_k, w_v, w_o;
# outputs, per-head weights and gradients compared for self- and cross-attention, with
# padding and causal masks, 1 to 8 heads, float32 and float64.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb03 as _checks

_checks.check_MultiHeadAttention(globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_MultiHeadAttention_dropout", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): dropout on the weights in train() mode, none in eval().
### BEGIN HIDDEN TESTS
from course_reference.checks import nb03 as _checks

_checks.check_MultiHeadAttention_dropout(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 4. Compare with `nn.MultiheadAttention`
#
# PyTorch's module computes the same thing. It stores the three input projections
# stacked in one `in_proj_weight` of shape `(3D, D)` (rows `0:D` are $W^Q$, then $W^K$,
# then $W^V$) and the output projection in `out_proj`. Copy our weights across and the
# outputs agree; its returned weights are **averaged over heads** unless you pass
# `average_attn_weights=False`.
#
# Mind the mask: its `key_padding_mask` uses the **opposite** convention, `True` =
# *ignore this key*. Our masks say `True` = *may attend*, so pass `~keep`.

# %%
d_model, num_heads = 16, 4
ours = MultiHeadAttention(d_model, num_heads).eval()
theirs = nn.MultiheadAttention(d_model, num_heads, batch_first=True).eval()
with torch.no_grad():
    theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
    theirs.out_proj.weight.copy_(ours.w_o.weight)
    theirs.out_proj.bias.copy_(ours.w_o.bias)

x = torch.randn(2, 6, d_model)
keep = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])  # (B, L): sentence 2 has 2 pads
with torch.no_grad():
    out_ours, w_ours = ours(x, x, x, mask=keep[:, None, None, :])
    out_theirs, w_theirs = theirs(x, x, x, key_padding_mask=~keep)  # True = ignore, hence ~
print(f"max |output difference|        = {(out_ours - out_theirs).abs().max():.2e}")
print(f"max |head-averaged weights diff| = {(w_ours.mean(dim=1) - w_theirs).abs().max():.2e}")
with torch.no_grad():
    _, w_right = theirs(x[1:], x[1:], x[1:], key_padding_mask=~keep[1:])
    _, w_wrong = theirs(x[1:], x[1:], x[1:], key_padding_mask=keep[1:])  # conventions mixed up
print(f"sentence 2, weight on its two padding keys: with ~keep {w_right[0, :, 4:].sum(-1).mean():.2f}, "
      f"with keep {w_wrong[0, :, 4:].sum(-1).mean():.2f} (it attends ONLY to padding)")

# %% [markdown]
# ## 5. What the heads look at
#
# Each head has its own projections, so each distributes its attention differently even
# on the same sentence. Here is a randomly initialised layer on a short sentence (trained
# heads specialise much more; notebook 07 shows a trained model's cross-attention).

# %%
words = ["the", "cat", "sat", "on", "the", "mat", "today"]
torch.manual_seed(3)
embed = nn.Embedding(len(set(words)), 32)
ids = torch.tensor([[sorted(set(words)).index(w) for w in words]])
layer = MultiHeadAttention(32, 4).eval()
with torch.no_grad():
    tokens = 3 * embed(ids)  # larger inputs: sharper (less uniform) weights, easier to see
    _, weights = layer(tokens, tokens, tokens)

fig, axes = plt.subplots(1, 4, figsize=(16, 4.2), sharey=True, layout="constrained")
for head, ax in enumerate(axes):
    sns.heatmap(weights[0, head], ax=ax, cmap="viridis", vmin=0, vmax=weights.max().item(), cbar=False,
                xticklabels=words, yticklabels=words, square=True)
    ax.set(title=f"head {head}", xlabel="key")
axes[0].set_ylabel("query")
fig.colorbar(axes[0].collections[0], ax=axes, label="weight", shrink=0.8)
plt.show()
print("Notice: the four heads weigh the same words differently; their outputs are concatenated.")

# %% [markdown]
# ## 6. What attention costs
#
# The score matrix has one entry per (query, key) pair: for length $L$ each head computes
# $L^2$ dot products of size $d_k$, so the scores and the weighted sum cost
# $O(L^2 \cdot D)$ operations per layer, next to $O(L \cdot D^2)$ for the four projections,
# and the weights take $O(L^2)$ memory per head. Counted exactly, the four projections take
# $4 L D^2$ multiply-adds and the scores plus the weighted sum $2 L^2 D$: the two are equal
# at $L = 2D$ (128 for the $D = 64$ of the cell below). Past that length the quadratic term
# dominates, and doubling the length comes closer and closer to quadrupling the cost.
#
# The paper compares layer types in its Table 1 ($n$ the length, $d$ the width, $k$ a
# convolution's kernel size, $r$ the size of a neighbourhood):
#
# | layer type | operations per layer | sequential operations | longest path between two positions |
# |---|---|---|---|
# | self-attention | $O(n^2 \cdot d)$ | $O(1)$ | $O(1)$ |
# | recurrent | $O(n \cdot d^2)$ | $O(n)$ | $O(n)$ |
# | convolutional | $O(k \cdot n \cdot d^2)$ | $O(1)$ | $O(\log_k n)$ |
# | self-attention (restricted) | $O(r \cdot n \cdot d)$ | $O(1)$ | $O(n/r)$ |
#
# Self-attention does more work per layer than a recurrent layer once $n > d$, but all of
# it in parallel (no step waits for the previous one), and any two positions are one step
# apart, where a recurrent layer passes information through $n$ steps. For sentences
# ($n$ of a few dozen, $d$ of hundreds) self-attention is the cheaper layer too. For very
# long sequences the paper suggests (section 4) letting each query attend only to the $r$
# positions around it: the cost becomes linear in $n$, and the price is the path, since two
# positions $n$ apart are now $n/r$ layers apart.
#
# The cell below times a forward pass on this machine ($D = 64$, $h = 4$, batch 8, one thread,
# the median of 7 runs) and draws the operation count of the formula beside it. *Predict, then
# run:* from $L = 512$ to $L = 1024$, should the time grow closer to 2x or to 4x?
#
# What to look for: at the longest lengths, where the $L^2$ terms dominate the work, a doubling
# of $L$ should cost about 4x, a slope near 2 on the log-log plot. Read the short lengths with
# care. A call there takes a millisecond or so, and costs that do not grow with $L$ (Python,
# starting each operation, allocating memory) weigh as much as the arithmetic, which pulls the
# ratios below 4x. In the middle, the step at which the score tensors stop fitting in the
# processor's caches can cost more than 4x. Both depend on the machine and change from run to
# run, so the short end of your curve may come out flatter or steeper than the formula: run the
# cell twice and compare.

# %%
layer = MultiHeadAttention(64, 4).eval()
lengths, seconds = [64, 128, 256, 512, 1024], []
threads = torch.get_num_threads()
torch.set_num_threads(1)  # one thread: timings do not depend on how many cores happen to be free
try:
    with torch.no_grad():
        for length in lengths:
            x = torch.randn(8, length, 64)
            layer(x, x, x)  # warm-up
            runs = []
            for _ in range(7):
                start = time.perf_counter()
                layer(x, x, x)
                runs.append(time.perf_counter() - start)
            seconds.append(sorted(runs)[len(runs) // 2])  # the median: robust to a disturbed run
finally:
    torch.set_num_threads(threads)
B, D = 8, 64
flops = [2 * B * (4 * n * D * D + 2 * n * n * D) for n in lengths]  # 4 projections + scores + weighted sum
memory_mb = [B * 4 * n**2 * 4 / 2**20 for n in lengths]  # float32 weights (B, h, L, L): a formula
slope = (math.log(seconds[-1]) - math.log(seconds[-2])) / (math.log(lengths[-1]) - math.log(lengths[-2]))

fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
axes[0].plot(lengths, [s * 1000 for s in seconds], marker="o", label="measured")
scale = seconds[-1] / flops[-1] * 1000
axes[0].plot(lengths, [f * scale for f in flops], linestyle="--", color="gray", label="operation count (scaled)")
axes[0].set(xscale="log", yscale="log", xlabel="sequence length L", ylabel="ms per forward",
            title=f"Time: slope {slope:.2f} between the last two lengths")
axes[0].legend()
axes[1].plot(lengths, memory_mb, marker="o", color="C1")
axes[1].set(xscale="log", yscale="log", xlabel="sequence length L", ylabel="MiB",
            title="Attention weights B·h·L² floats (computed)")
for ax in axes:
    ax.set_xticks(lengths, [str(n) for n in lengths])
plt.tight_layout()
plt.show()
for length, s, previous in zip(lengths[1:], seconds[1:], seconds[:-1], strict=True):
    print(f"L={length:5d}: {s * 1000:7.1f} ms, x{s / previous:.1f} vs L/2")
print(f"Notice: on log-log axes a cost that grows as L² is a line of slope 2. The measured slope over "
      f"L = {lengths[-2]}..{lengths[-1]} is {slope:.2f}. The ratios at shorter lengths also carry fixed "
      "per-call costs, cache effects and noise; compare them between two runs. The memory panel is the "
      "formula, not a measurement.")

# %% [markdown]
# ## In your own words
#
# Answer in a few sentences each, in the cell below each question; where a question asks for your own
# numbers, quote them from your run. These answers are graded by hand.

# %% [markdown]
# **Question 1** (2 points). Splitting $D = 512$ into 8 heads of $d_k = 64$: how do the number of
# parameters and the multiply-adds compare with a single head of 512? What do eight heads give that
# one head cannot?

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_heads_cost", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# The same: $W_Q, W_K, W_V, W_O$ are $D \times D$ whatever the number of heads, and the scores cost $h
# \cdot L^2 \cdot d_k = L^2 D$ multiply-adds either way (only the number of softmaxes grows, $h L^2$
# exponentials). What changes is that each position gets $h$ separate attention distributions: one
# head must average everything it needs into one weighting, while eight can look at different
# positions for different reasons (the previous word, the subject, a matching word) and $W_O$ combines
# them.

# %% [markdown]
# **Question 2** (2 points). Why does `split_heads` reshape `(B, L, D)` to `(B, L, h, d_k)` and then
# transpose, instead of reshaping straight to `(B, h, L, d_k)`?

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_split_heads", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# A reshape keeps the order of the numbers in memory. In `(B, L, D)` each position's $D$ features are
# contiguous, so `(B, L, h, d_k)` cuts each position's features into $h$ chunks: chunk $i$ is head
# $i$'s. The transpose then only moves the head axis forward. Reshaping straight to `(B, h, L, d_k)`
# would give "head 0" the first $L \cdot d_k$ numbers, i.e. all the features of the first $L/h$
# positions: heads would mix positions and features, and attention would compare the wrong things
# (with no error raised).
