# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Self-attention
#
# Recurrent networks read a sentence one word at a time and squeeze everything seen so
# far into one hidden state. Words far apart can only talk through that bottleneck, and
# the work cannot be spread over the positions of a sentence in parallel.
#
# Attention began as a repair to that bottleneck inside a recurrent translation model.
# Bahdanau, Cho and Bengio ([2015](https://arxiv.org/abs/1409.0473)) let the
# decoder, before it writes each target word, score every hidden state of the encoder (one
# per source word) against the state $s_{i-1}$ it has reached, with a small feed-forward
# network (their section 3.1), in their appendix A.1.2 written $e_{ij} = v^\top \tanh(W s_{i-1} + U h_j)$:
# *additive* attention. A softmax turns the scores into
# weights, and the weighted sum of the encoder states is what the decoder reads. In the
# words used below, the decoder state is the *query* and the encoder states are both the
# *keys* and the *values*. The Transformer keeps this step, scores with a dot product instead
# of the small network (section 3.2.1 compares the two), and drops the recurrence.
#
# **Self-attention** lets every position look at every other position directly. Each
# word asks a question (its *query*), every word offers a label (its *key*) and some
# content (its *value*); a word's new representation is an average of all values,
# weighted by how well its query matches each key. Because the queries, keys and values
# all come from the *same* sequence, it is called *self*-attention. That is the core of
# the Transformer (Vaswani et al., 2017, *Attention Is All You Need*, section 3.2).
#
# In this notebook you build plain dot-product self-attention,
#
# $$\mathrm{SelfAttention}(X) = \mathrm{softmax}\!\left(Q K^\top\right) V,\qquad
#   Q = X W_Q,\; K = X W_K,\; V = X W_V,$$
#
# step by step. The paper also divides $QK^\top$ by $\sqrt{d_k}$; *why* that matters is
# the lesson of notebook 02, so here there is **no scale**.
#
# **Exercises:** `softmax`, `attention_scores`, `self_attention`, `SelfAttention`.
# Each answer cell says `# YOUR CODE HERE`; the cell after it holds tests you can run.
# The grader also runs hidden tests that compare your answer with a reference on random
# inputs.
#
# Shapes follow PyTorch's batch-first convention: `B` batch, `L` sequence length, `D`
# model size (`d_model`), `d_k` query/key size, `d_v` value size.

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
        "01_self_attention"
    )
    PROVIDED = []  # modules shipped beside this notebook (none for notebook 01)
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
from torch import nn

torch.manual_seed(0)
sns.set_theme(style="white", palette="colorblind")

# %% [markdown]
# ## 1. A stable softmax
#
# Attention turns similarity scores into weights that are positive and sum to one:
#
# $$\mathrm{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}.$$
#
# Written literally, this breaks on large scores: in float32, $e^{89}$ is already `inf`,
# and `inf / inf` is `NaN`. Softmax does not change when the same constant is subtracted
# from every entry ($e^{x_i - m}/\sum_j e^{x_j - m} = e^{x_i}/\sum_j e^{x_j}$), so
# subtracting the maximum $m = \max_j x_j$ makes every exponent $\le 0$ and nothing
# overflows.
#
# *Predict, then run:* what does the literal formula return for the scores
# `[1000, 999, 998]`, and what does the shifted one return?

# %%
scores = torch.tensor([1000.0, 999.0, 998.0])
print("naive exp:", scores.exp(), "->", scores.exp() / scores.exp().sum())
print("shifted  :", (scores - scores.max()).exp() / (scores - scores.max()).exp().sum())

# %% [markdown]
# **Exercise 1.** Write `softmax(x, dim=-1)` by hand (from `exp`, `sum` and `max`; not
# `torch.softmax`). It must work along any `dim` of a tensor of any shape, keep the
# dtype of `x`, and stay finite for inputs near ±1000.

# %% [markdown]
# **Stuck on `softmax`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.2.1, the softmax in Eq. (1).
#
# <details><summary>Hint 1: a nudge</summary>
#
# Three reductions along the same `dim`: a max, an exp, a sum. Keep that axis each time so shapes line up.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Subtracting the row maximum changes nothing mathematically but keeps every exponent at or below 0, so `exp` cannot overflow. Then divide by the sum along `dim`.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# The formula is $e^{x_i - m} / \sum_j e^{x_j - m}$ with $m$ the maximum along `dim`. Look up
# `Tensor.amax` (or `Tensor.max`, which returns values and indices), `Tensor.exp` and
# `Tensor.sum`, each with `dim=dim, keepdim=True`: for `x` of shape `(2, 3)` and `dim=1`, the
# maximum and the sum should have shape `(2, 1)`.
#
# </details>
#
# **Check yourself:** Why does `keepdim=True` matter for `x` of shape `(2, 3)` and `dim=1`?
#
# <details><summary>Answer</summary>
#
# Without it the max has shape `(2,)`, which broadcasts against the last axis (size 3) and fails, or silently pairs the wrong entries when the sizes happen to match. With it the shape is `(2, 1)` and each row gets its own maximum.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "softmax", "locked": false, "schema_version": 3, "solution": true}
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of ``x`` along ``dim``, written by hand.

    Args:
        x: floating tensor of any shape.
        dim: the axis whose entries become probabilities.

    Returns:
        A tensor of the same shape and dtype; entries along ``dim`` are >= 0 and sum to 1.
    """
    ### BEGIN SOLUTION
    shifted = x - x.amax(dim=dim, keepdim=True)  # every exponent <= 0: no overflow
    exp = shifted.exp()
    return exp / exp.sum(dim=dim, keepdim=True)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_softmax", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = torch.tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
p = softmax(x, dim=-1)
assert p.shape == x.shape, f"expected shape {tuple(x.shape)}, got {tuple(p.shape)}"
assert torch.allclose(p.sum(dim=-1), torch.ones(2)), "each row should sum to 1 along dim=-1"
assert torch.allclose(p[1], torch.full((3,), 1 / 3)), "equal scores should give equal weights"
assert torch.allclose(p[0], torch.tensor([0.0900, 0.2447, 0.6652]), atol=1e-4), (
    f"softmax([1, 2, 3]) should be about [0.0900, 0.2447, 0.6652], got {p[0].tolist()}"
)
assert torch.allclose(softmax(x, dim=0).sum(dim=0), torch.ones(3)), "use the `dim` argument"
big = softmax(torch.tensor([1000.0, 999.0, 998.0]))
assert torch.isfinite(big).all(), "softmax overflowed on large inputs: subtract the max first"
print("softmax: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_softmax_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): values against a reference for several shapes,
# dims and dtypes, large inputs, and no call to a built-in softmax.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb01 as _checks

_checks.check_softmax(globals())
### END HIDDEN TESTS

# %% [markdown]
# Your `softmax` at work on three rows of scores: a flat row, a moderate one and one
# with a clear winner.

# %%
demo_scores = torch.tensor([[1.0, 1.0, 1.0, 1.0], [2.0, 1.0, 0.5, 0.0], [6.0, 1.0, 0.5, 0.0]])
fig, ax = plt.subplots(figsize=(4.5, 2.6))
sns.heatmap(softmax(demo_scores, dim=-1), annot=True, fmt=".2f", cmap="viridis", vmin=0, vmax=1, ax=ax,
            yticklabels=["flat", "moderate", "clear winner"], cbar_kws={"label": "weight"})
ax.set(xlabel="position j", title="softmax(scores, dim=-1)")
plt.show()
print("Notice: each row sums to 1; equal scores share the weight equally, and a score a few units "
      "above the rest takes almost all of it.")

# %% [markdown]
# ## 2. Attention scores: how well does each query match each key?
#
# The similarity of a query $q$ and a key $k$ is their dot product $q \cdot k =
# \sum_t q_t k_t$: large when they point the same way. For all pairs at once, stack the
# queries as rows of $Q$ (`Lq x d_k`) and the keys as rows of $K$ (`Lk x d_k`):
#
# $$S = Q K^\top, \qquad S_{ij} = q_i \cdot k_j, \qquad S \in \mathbb{R}^{L_q \times L_k}.$$
#
# Row $i$ of $S$ holds query $i$'s scores against every key.
#
# **Exercise 2.** Write `attention_scores(query, key)` for inputs with any number of
# leading batch axes: `query (..., Lq, d_k)`, `key (..., Lk, d_k)` -> `(..., Lq, Lk)`.
# Raw dot products, no scaling. (`key.T` would reverse *all* axes; you only want to
# swap the last two.)

# %% [markdown]
# **Stuck on `attention_scores`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.2.1, the $QK^T$ in Eq. (1).
#
# <details><summary>Hint 1: a nudge</summary>
#
# Every query meets every key: the output has one entry per (query, key) pair.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# A matrix product of `query` with the key matrix turned on its side: swap the key's last two axes, leave the batch axes alone.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Look up `Tensor.transpose(dim0, dim1)`: negative axes count from the end, so it can swap the
# last two axes whatever the number of batch axes. `@` (`torch.matmul`) treats every axis but
# the last two as a batch axis: `(..., Lq, d_k) @ (..., d_k, Lk)` gives `(..., Lq, Lk)`.
#
# </details>
#
# **Check yourself:** `query` is `(4, 7, 16)` and `key` is `(4, 9, 16)`. What shape do the scores have?
#
# <details><summary>Answer</summary>
#
# `(4, 7, 9)`: for each of the 4 batch entries, 7 queries times 9 keys.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "attention_scores", "locked": false, "schema_version": 3, "solution": true}
def attention_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Dot product of every query with every key.

    Args:
        query: ``(..., Lq, d_k)``.
        key: ``(..., Lk, d_k)``.

    Returns:
        ``(..., Lq, Lk)`` with entry ``[i, j] = query[i] . key[j]``.
    """
    ### BEGIN SOLUTION
    return query @ key.transpose(-2, -1)  # (..., Lq, d_k) @ (..., d_k, Lk) -> (..., Lq, Lk)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_attention_scores", "locked": true, "points": 1, "schema_version": 3, "solution": false}
q = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])  # (1, 2, 2)
k = torch.tensor([[[1.0, 1.0], [3.0, 0.0], [0.0, -1.0]]])  # (1, 3, 2)
s = attention_scores(q, k)
assert s.shape == (1, 2, 3), f"expected shape (1, 2, 3) = (B, Lq, Lk), got {tuple(s.shape)}"
assert torch.equal(s, torch.tensor([[[1.0, 3.0, 0.0], [2.0, 0.0, -2.0]]])), (
    f"scores[i, j] should be query i . key j; got {s.tolist()}"
)
assert attention_scores(torch.randn(2, 3, 4, 5), torch.randn(2, 3, 6, 5)).shape == (2, 3, 4, 6), (
    "attention_scores should work with several leading batch axes"
)
print("attention_scores: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_attention_scores_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): values against a reference on random shapes and dtypes.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb01 as _checks

_checks.check_attention_scores(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Self-attention
#
# Queries, keys and values are three different *views* of the same tokens, made by
# three projection matrices: $Q = XW_Q$, $K = XW_K$ (both `D x d_k`) and $V = XW_V$
# (`D x d_v`). Each output row is a weighted average of the value rows, with the weights
# of that row's query:
#
# $$\mathrm{out} = \underbrace{\mathrm{softmax}(QK^\top)}_{\text{weights } (L \times L)} V.$$
#
# Softmax runs over the **keys** (the last axis, `dim=-1`): each query distributes one
# unit of attention over the positions it looks at. Over `dim=-2` the weights would
# instead say how a *key* is shared among queries, which is not what we average with.
#
# **Exercise 3.** Write `self_attention(x, w_q, w_k, w_v)` with `x (B, L, D)`,
# `w_q, w_k (D, d_k)`, `w_v (D, d_v)`, returning `(B, L, d_v)`. Use your `softmax` and
# `attention_scores`.

# %% [markdown]
# **Stuck on `self_attention`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.2.1, Eq. (1) without the scale.
#
# <details><summary>Hint 1: a nudge</summary>
#
# Self-attention: queries, keys and values all come from the same `x`, each through its own weight matrix.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Project `x` three times, score queries against keys, turn each query's row of scores into weights with your `softmax` over the keys, then mix the values with those weights.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# $\mathrm{out} = \mathrm{softmax}(QK^\top)\,V$ with $Q = XW_Q$, $K = XW_K$, $V = XW_V$. The
# shapes to aim for: $Q$ and $K$ `(B, L, d_k)`, $V$ `(B, L, d_v)`, the scores and the weights
# `(B, L, L)`, the output `(B, L, d_v)`. Your `attention_scores` gives the scores; your
# `softmax` with `dim=-1` gives the weights; `@` does the projections and the weighted sum.
#
# </details>
#
# **Check yourself:** Which axis of the `(B, L, L)` score tensor must the softmax run over, and why?
#
# <details><summary>Answer</summary>
#
# The last one (the keys): each query distributes one unit of attention over all keys, so each row must sum to 1.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "self_attention", "locked": false, "schema_version": 3, "solution": true}
def self_attention(
    x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor
) -> torch.Tensor:
    """Unscaled dot-product self-attention, ``softmax(Q K^T) V``.

    Args:
        x: ``(B, L, D)`` token vectors.
        w_q, w_k: ``(D, d_k)`` query and key projections.
        w_v: ``(D, d_v)`` value projection.

    Returns:
        ``(B, L, d_v)``.
    """
    ### BEGIN SOLUTION
    query, key, value = x @ w_q, x @ w_k, x @ w_v  # (B, L, d_k), (B, L, d_k), (B, L, d_v)
    weights = softmax(attention_scores(query, key), dim=-1)  # (B, L, L), rows sum to 1
    return weights @ value  # (B, L, d_v)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_self_attention", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def _test_self_attention():
    x = torch.randn(2, 5, 8)
    w_q, w_k, w_v = torch.randn(8, 4), torch.randn(8, 4), torch.randn(8, 6)
    out = self_attention(x, w_q, w_k, w_v)
    assert out.shape == (2, 5, 6), f"expected (B, L, d_v) = (2, 5, 6), got {tuple(out.shape)}"
    # With identical tokens every weight is equal, so each output is the mean value row.
    same = torch.ones(1, 3, 8)
    expected = (same @ w_v).mean(dim=1, keepdim=True).expand(1, 3, 6)
    assert torch.allclose(self_attention(same, w_q, w_k, w_v), expected, atol=1e-5), (
        "identical tokens should give the average of the values"
    )
    # One dominant key: every query should copy that key's value.
    eye = torch.eye(8)
    x1 = torch.zeros(1, 2, 8)
    x1[0, 0, 0], x1[0, 1, 1] = 1.0, 30.0
    w_k1 = torch.zeros(8, 8)
    w_k1[1, 0] = 1.0
    out1 = self_attention(x1, eye, w_k1, eye)
    assert torch.allclose(out1[0, 0], x1[0, 1], atol=1e-4), (
        "query 0 matches key 1 far better (score 30 against 0), so its output should be "
        "value 1 (softmax over the keys, dim=-1, and no scale in notebook 01)"
    )


### BEGIN HIDDEN TESTS
# The grader runs this test with the reference softmax and attention_scores, so a
# mistake in those is charged to those exercises only.
from course_reference.checks import isolate as _isolate
from course_reference.checks import nb01 as _checks

_test_self_attention = _isolate(
    globals(), _test_self_attention, **_checks.upstream("softmax", "attention_scores")
)
### END HIDDEN TESTS
_test_self_attention()
print("self_attention: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_self_attention_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): values against a reference on random shapes and dtypes.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb01 as _checks

_checks.check_self_attention(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 4. A `SelfAttention` module
#
# In a model the projections are learned, so they live in `nn.Linear` layers without
# bias. Note that `nn.Linear(D, d_k)` stores its weight as `(d_k, D)` and computes
# `x @ weight.T`; calling the layer, `self.w_q(x)`, does that for you.
#
# **Exercise 4.** Complete `forward` so that it returns `(out, weights)`: the output
# `(B, L, d_v)` and the attention weights `(B, L, L)`. Keep the attribute names `w_q`,
# `w_k`, `w_v`: the grader copies reference weights into them.

# %% [markdown]
# **Stuck on `SelfAttention`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.2.1 and §3.2.2 (the projections $W^Q, W^K, W^V$).
#
# <details><summary>Hint 1: a nudge</summary>
#
# The layer is the function you just wrote, with its three weight matrices learned as `nn.Linear` layers.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# `self.w_q(x)` computes `x @ W_q^T`: use the layers for the projections, then the same scores, softmax and weighted sum. Return the weights too.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Calling a layer, `self.w_k(x)`, gives `(B, L, d_k)` from `(B, L, D)`, and `self.w_v(x)` gives
# `(B, L, d_v)`. From there it is `self_attention`'s computation: scores `(B, L, L)`, weights by
# your `softmax` over the keys, output `(B, L, d_v)`. `forward` returns a tuple: the output first,
# then the weights.
#
# </details>
#
# **Check yourself:** Suppose `w_k` had a bias $b_k$, so every key became $k_j + b_k$. Would the
# attention weights change? And with a bias $b_q$ on `w_q` instead?
#
# <details><summary>Answer</summary>
#
# A key bias changes nothing. The score of query $i$ and key $j$ becomes
# $q_i \cdot k_j + q_i \cdot b_k$, and the added term $q_i \cdot b_k$ is the same for every key $j$
# of that query: the whole row of scores moves by one constant, and softmax along the keys does
# not change when a constant is added to a row (section 1). A query bias adds $b_q \cdot k_j$,
# which is different for each key, so it does change the weights. The paper's $W^Q, W^K, W^V$ are
# plain linear maps, and this notebook keeps them so; the cell after the tests checks both claims.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "SelfAttention", "locked": false, "schema_version": 3, "solution": true}
class SelfAttention(nn.Module):
    """Single-head self-attention with learned projections (no bias, no scale).

    Args:
        d_model: size ``D`` of the input vectors.
        d_k: size of queries and keys (default ``d_model``).
        d_v: size of values and of the output (default ``d_model``).

    Shape:
        forward(x): ``x (B, L, D)`` -> ``(out (B, L, d_v), weights (B, L, L))``.
    """

    def __init__(self, d_model: int, d_k: int | None = None, d_v: int | None = None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        d_v = d_model if d_v is None else d_v
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ### BEGIN SOLUTION
        query, key, value = self.w_q(x), self.w_k(x), self.w_v(x)
        weights = softmax(attention_scores(query, key), dim=-1)  # (B, L, L)
        return weights @ value, weights
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_SelfAttention", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def _test_SelfAttention():
    layer = SelfAttention(8, d_k=4, d_v=6)
    assert isinstance(layer.w_q, nn.Linear) and layer.w_q.bias is None, "w_q: nn.Linear, no bias"
    out, weights = layer(torch.randn(2, 5, 8))
    assert out.shape == (2, 5, 6), f"output: expected (B, L, d_v) = (2, 5, 6), got {tuple(out.shape)}"
    assert weights.shape == (2, 5, 5), f"weights: expected (B, L, L) = (2, 5, 5), got {tuple(weights.shape)}"
    assert torch.allclose(weights.sum(-1), torch.ones(2, 5), atol=1e-5), "weight rows should sum to 1"
    with torch.no_grad():
        expected = self_attention(torch.ones(1, 2, 8), layer.w_q.weight.T, layer.w_k.weight.T,
                                  layer.w_v.weight.T)
        assert torch.allclose(layer(torch.ones(1, 2, 8))[0], expected, atol=1e-5), (
            "SelfAttention should compute the same as self_attention with the layers' weights"
        )
    assert SelfAttention(8)(torch.randn(1, 3, 8))[0].shape == (1, 3, 8), "d_k, d_v default to d_model"


### BEGIN HIDDEN TESTS
from course_reference.checks import isolate as _isolate
from course_reference.checks import nb01 as _checks

_test_SelfAttention = _isolate(
    globals(), _test_SelfAttention,
    **_checks.upstream("softmax", "attention_scores", "self_attention"),
)
### END HIDDEN TESTS
_test_SelfAttention()
print("SelfAttention: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_SelfAttention_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): reference weights copied into your module, outputs,
# weights and gradients compared on random inputs in float32 and float64.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb01 as _checks

_checks.check_SelfAttention(globals())
### END HIDDEN TESTS

# %% [markdown]
# A bias on the keys would be a wasted parameter: it shifts each query's whole row of scores by
# the same amount, which softmax ignores. A bias on the queries is a different matter. Adding
# random biases to the projections of a few random tokens shows both:

# %%
x_bias = torch.randn(1, 5, 8, dtype=torch.float64)
w_q_bias, w_k_bias = torch.randn(8, 4, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64)
b_q, b_k = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
q_plain, k_plain = x_bias @ w_q_bias, x_bias @ w_k_bias
plain = torch.softmax(q_plain @ k_plain.transpose(-2, -1), dim=-1)
with_key_bias = torch.softmax(q_plain @ (k_plain + b_k).transpose(-2, -1), dim=-1)
with_query_bias = torch.softmax((q_plain + b_q) @ k_plain.transpose(-2, -1), dim=-1)
print(f"key bias:   weights change by at most {(with_key_bias - plain).abs().max().item():.1e}")
print(f"query bias: weights change by at most {(with_query_bias - plain).abs().max().item():.1e}")
print("Notice: the key bias changes the weights only by rounding error (float64); the query bias "
      "changes them for real.")

# %% [markdown]
# ## 5. Looking at attention
#
# Give six words of a toy sentence hand-made 4-dimensional embeddings whose axes mean
# *is an animal*, *is a place or thing*, *is a verb*, *is a function word*. With identity
# projections ($W_Q = W_K = W_V = I$) the weights are just softmax of embedding
# similarities: each word attends to itself and to words of its own kind.

# %%
tokens = ["the", "cat", "sat", "on", "the", "mat"]
features = {  # animal, place/thing, verb, function word
    "the": [0.0, 0.0, 0.0, 1.5],
    "cat": [2.0, 0.5, 0.0, 0.0],
    "sat": [0.3, 0.0, 2.0, 0.0],
    "on": [0.0, 0.5, 0.3, 1.0],
    "mat": [0.5, 2.0, 0.0, 0.0],
}
x_toy = torch.tensor([[features[t] for t in tokens]])  # (1, 6, 4)
identity = torch.eye(4)
weights_toy = softmax(attention_scores(x_toy @ identity, x_toy @ identity), dim=-1)[0]

fig, ax = plt.subplots(figsize=(5, 4))
sns.heatmap(weights_toy, annot=True, fmt=".2f", cmap="viridis", vmin=0, vmax=1,
            xticklabels=tokens, yticklabels=tokens, ax=ax, cbar_kws={"label": "weight"})
ax.set(xlabel="key (attended to)", ylabel="query (attending)",
       title="Self-attention weights, softmax(X Xᵀ)")
plt.tight_layout()
plt.show()
print("Notice: each row sums to 1, and both 'the' tokens attend to each other as much as to "
      "themselves: attention sees content, not position.")

# %% [markdown]
# ## 6. Compare with PyTorch
#
# `torch.nn.functional.scaled_dot_product_attention` computes
# $\mathrm{softmax}(QK^\top \cdot \mathrm{scale})V$; with `scale=1.0` it is exactly
# this notebook's unscaled attention. (It returns the output only, not the weights.)

# %%
layer = SelfAttention(8, d_k=4, d_v=6)
x_cmp = torch.randn(2, 5, 8)
with torch.no_grad():
    mine, _ = layer(x_cmp)
    builtin = F.scaled_dot_product_attention(layer.w_q(x_cmp), layer.w_k(x_cmp), layer.w_v(x_cmp),
                                             scale=1.0)
print(f"max |mine - built-in| = {(mine - builtin).abs().max().item():.2e}")

# %% [markdown]
# ## What's next
#
# The weights above came from tiny 4-dimensional vectors. With `d_k = 512`, dot products
# become so large that softmax puts almost all weight on one key and gradients vanish.
# Notebook 02 measures this and fixes it with the $1/\sqrt{d_k}$ scale, and adds masks.

# %% [markdown]
# ## In your own words
#
# Answer in a few sentences each, in the cell below each question; where a question asks for your own
# numbers, quote them from your run. These answers are graded by hand.

# %% [markdown]
# **Question 1** (2 points). Your `softmax` subtracts each row's maximum before `exp`. Why does this
# leave the result unchanged, and what happens without it to a row of scores such as `[1000.0, 999.0]`
# in float32?

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_stable_softmax", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# Subtracting a constant $m$ from every score multiplies the numerator and the denominator by the same
# factor $e^{-m}$, which cancels: $\mathrm{softmax}(x - m) = \mathrm{softmax}(x)$. Without it,
# `exp(1000)` overflows float32 (whose largest value is about $3.4 \times 10^{38}$, reached near
# $e^{88.7}$) to `inf`, and `inf / inf` is `nan`: the row becomes `[nan, nan]`. With the shift the
# exponents are $e^{0} = 1$ and $e^{-1} \approx 0.37$, and the row is `[0.73, 0.27]`; only tiny terms
# can underflow to 0, which is harmless.

# %% [markdown]
# **Question 2** (2 points). In section 5, with $W_Q = W_K = I$, each word attends mostly to itself
# and to words of its own kind. Why does that follow from the identity projections? Name one thing
# that learned projections ($W_Q \ne W_K$) make possible and the identity does not.

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_toy_attention", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# With identity projections the score of word $i$ for word $j$ is the dot product of their embeddings,
# a similarity: words that share a feature axis score high, and $x_i \cdot x_i = \lVert x_i \rVert^2$
# is usually the largest in its row, so the diagonal and same-kind words dominate. The scores are also
# symmetric ($s_{ij} = s_{ji}$). Learned projections give $x_i W_Q W_K^\top x_j$, which need not be
# symmetric or a similarity: a query can ask for something other than what the word is, e.g. a verb
# looking for its subject ("sat" attending to "cat" more than to itself).
