# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · Positional encoding
#
# Attention compares every query with every key, and nothing in that comparison says
# *where* a word is. Shuffle the words of a sentence and self-attention returns the same
# vectors, shuffled the same way: it is **permutation-equivariant** (section 4 shows it).
# "dog bites man" and "man bites dog" would look alike.
#
# The Transformer adds a position signal to each token vector before the first layer
# (Vaswani et al., 2017, section 3.5). The paper uses fixed sinusoids of geometrically
# spaced wavelengths:
#
# $$PE_{(p,\,2i)} = \sin\!\left(\frac{p}{10000^{2i/d_{model}}}\right), \qquad
#   PE_{(p,\,2i+1)} = \cos\!\left(\frac{p}{10000^{2i/d_{model}}}\right).$$
#
# Column pair $i$ is a sine/cosine of one frequency; low $i$ oscillates fast (wavelength
# $2\pi$), high $i$ slowly (up to $2\pi \cdot 10000$). For any offset $k$, $PE_{p+k}$ is a
# fixed rotation of $PE_p$ within each pair, so relative positions are easy to read off.
#
# **Exercises:** `sinusoidal_positional_encoding`, `PositionalEncoding`, `TokenEmbedding`.

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
        "05_positional_encoding"
    )
    PROVIDED = ["course_blocks.py"]  # reference code of notebooks 01-04
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
from course_blocks import MultiHeadAttention
from torch import nn

torch.manual_seed(0)
sns.set_theme(style="whitegrid", palette="colorblind")

# %% [markdown]
# ## 1. The sinusoidal table
#
# Build the whole `(max_len, d_model)` table at once: positions as a column
# `(max_len, 1)`, the $d_{model}/2$ frequencies $1/10000^{2i/d}$ as a row, their product
# gives every angle; sines go to the even columns `0::2`, cosines to the odd ones `1::2`.
# `10000 ** (-x)` and `exp(-x * log(10000))` are the same number; either is fine.
#
# **Exercise 1.** Write `sinusoidal_positional_encoding(max_len, d_model)` -> float32
# `(max_len, d_model)`; raise `ValueError` for an odd `d_model`.

# %% [markdown]
# **Stuck on `sinusoidal_positional_encoding`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.5, the two PE equations.
#
# <details><summary>Hint 1: a nudge</summary>
#
# Build a table of angles `position x frequency`, then fill even columns with sin and odd columns with cos.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Frequencies are $10000^{-2i/d_{model}}$ for $i = 0, 1, \dots, d_{model}/2 - 1$; angles are the outer product of positions and frequencies, shape `(max_len, d_model/2)`. Compute in float64 and return float32.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Positions: `torch.arange(max_len)` as a column, shape `(max_len, 1)` (index with `[:, None]`). The exponents $2i$: `torch.arange(0, d_model, 2)`, shape `(d_model/2,)`. Their product (after turning the exponents into frequencies with `**` or `torch.exp`) broadcasts to the angles, `(max_len, d_model/2)`. Start from an empty `(max_len, d_model)` table (`torch.empty`) and assign `torch.sin` of the angles to the slice of even columns (`0::2`) and `torch.cos` to the odd ones (`1::2`).
#
# </details>
#
# **Check yourself:** What is row 0 of the table?
#
# <details><summary>Answer</summary>
#
# `[0, 1, 0, 1, ...]`: at position 0 every angle is 0, so the sines are 0 and the cosines are 1.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "sinusoidal_positional_encoding", "locked": false, "schema_version": 3, "solution": true}
def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The paper's sinusoidal position table (section 3.5).

    Args:
        max_len: number of positions.
        d_model: model size ``D`` (even).

    Returns:
        float32 ``(max_len, D)`` with ``PE[p, 2i] = sin(p / 10000^(2i/D))`` and
        ``PE[p, 2i+1] = cos(p / 10000^(2i/D))``.

    Raises:
        ValueError: if ``d_model`` is odd.
    """
    ### BEGIN SOLUTION
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even (sin/cos pairs), got {d_model}")
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    inv_freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    angles = position * inv_freq  # (max_len, D/2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.float()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sinusoidal_positional_encoding", "locked": true, "points": 1, "schema_version": 3, "solution": false}
pe = sinusoidal_positional_encoding(50, 8)
assert pe.shape == (50, 8) and pe.dtype == torch.float32, f"expected float32 (50, 8), got {pe.dtype} {tuple(pe.shape)}"
assert torch.allclose(pe[0], torch.tensor([0.0, 1.0] * 4)), f"row 0 is [sin 0, cos 0, ...] = [0, 1, 0, 1, ...], got {pe[0].tolist()}"
assert abs(pe[1, 0].item() - math.sin(1.0)) < 1e-6 and abs(pe[1, 1].item() - math.cos(1.0)) < 1e-6, (
    "pair 0 has frequency 1: PE[1, 0] = sin(1), PE[1, 1] = cos(1)"
)
assert abs(pe[7, 2].item() - math.sin(7 / 10000 ** (2 / 8))) < 1e-6, "PE[7, 2] = sin(7 / 10000^(2*1/8))"
try:
    sinusoidal_positional_encoding(10, 7)
except ValueError:
    pass
else:
    raise AssertionError("an odd d_model should raise ValueError")
print("sinusoidal_positional_encoding: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_sinusoidal_positional_encoding_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): the whole table against a reference for several sizes.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb05 as _checks

_checks.check_sinusoidal_positional_encoding(globals())
### END HIDDEN TESTS

# %% [markdown]
# **What it looks like.** Left: the table, transposed: each row is one dimension, a wave
# along the positions, and the rows at the top (low dimensions) oscillate fastest.
# Middle: a few dimensions over positions. Right: the dot product of every pair of
# position vectors, $\sum_i \cos(\omega_i (p - q))$, which depends only on their
# *distance* $p - q$ (the bands run parallel to the diagonal). It is largest at distance 0
# and tends to shrink as positions move apart, but with ripples: it is not a monotone
# function of distance.

# %%
table = sinusoidal_positional_encoding(100, 64)
fig, axes = plt.subplots(1, 3, figsize=(16, 4.2), layout="constrained")
sns.heatmap(table.T, ax=axes[0], cmap="RdBu_r", center=0, cbar_kws={"label": "value"})
axes[0].set(title="PE table (columns = positions)", xlabel="position p", ylabel="dimension", xticks=[], yticks=[])
for dim in (0, 4, 16, 40):
    axes[1].plot(table[:, dim], label=f"dim {dim}")
axes[1].set(title="a few dimensions over positions", xlabel="position p", ylabel="PE[p, dim]")
axes[1].legend(loc="lower left", fontsize=8)
sns.heatmap(table @ table.T, ax=axes[2], cmap="viridis", cbar_kws={"label": "PE_p · PE_q"}, square=True)
axes[2].set(title="similarity of positions", xlabel="position q", ylabel="position p", xticks=[], yticks=[])
plt.show()
similarity = (table @ table.T)[0]
print("Notice: similarity is highest on the diagonal and constant along it: it encodes distance. "
      f"From position 0: {', '.join(f'{v:.1f}' for v in similarity[:8].tolist())}, ... (not monotone).")

# %% [markdown]
# **Relative positions.** The paper chose sinusoids because "for any fixed offset $k$,
# $PE_{p+k}$ can be represented as a linear function of $PE_p$" (section 3.5). Take one
# frequency $\omega$ and its pair of columns $(\sin \omega p, \cos \omega p)$. The angle-sum
# formulas give
#
# $$\begin{pmatrix} \sin \omega(p+k) \\ \cos \omega(p+k) \end{pmatrix} =
# \begin{pmatrix} \cos \omega k & \sin \omega k \\ -\sin \omega k & \cos \omega k \end{pmatrix}
# \begin{pmatrix} \sin \omega p \\ \cos \omega p \end{pmatrix},$$
#
# a rotation by the angle $\omega k$ that depends on the offset $k$ but not on $p$. One
# block per frequency makes a $D \times D$ matrix $M_k$ with $PE_{p+k} = M_k \, PE_p$ for
# every position. *Predict:* will one $M_k$, built once, move every row of the table by $k$?

# %%
def offset_matrix(k: int, d_model: int) -> torch.Tensor:
    """The block-diagonal rotation M_k with PE[p + k] = M_k @ PE[p] (float64)."""
    omega = 1.0 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(omega * k), torch.sin(omega * k)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(c)  # sin row <- cos(wk) sin + sin(wk) cos
    m[0::2, 1::2] = torch.diag(s)
    m[1::2, 0::2] = torch.diag(-s)  # cos row <- -sin(wk) sin + cos(wk) cos
    m[1::2, 1::2] = torch.diag(c)
    return m


table64 = sinusoidal_positional_encoding(120, 64).double()
for k in (1, 5, 20):
    moved = table64[:-k] @ offset_matrix(k, 64).T  # every row p, rotated
    print(f"k = {k:2d}: max |M_k PE_p - PE_(p+k)| over all p = {(moved - table64[k:]).abs().max().item():.1e}")
print("Notice: one matrix per offset, the same for every position (errors at float32 rounding), so a "
      "layer can learn to attend 'k words back' with a fixed linear map.")

# %% [markdown]
# Learned position embeddings (an `nn.Embedding(max_len, d_model)` trained like the token
# table, as in BERT and GPT-2) do as well on translation (the paper's Table 3, row E)
# and have no such structure. The paper's stated reason for keeping the sinusoids is
# length: "it may allow the model to extrapolate to sequence lengths longer than the ones
# encountered during training" (section 3.5). A learned table has no row past its last
# position; the sinusoids are defined for every $p$. Later measurements did not bear the
# hope out: Press et al. (2022, [*Train Short, Test Long*](https://arxiv.org/abs/2108.12409),
# ALiBi) found that a language model with sinusoids gets worse soon after its inputs pass
# the training length, because positions past it produce vectors (and score patterns) the
# model never saw; adding a penalty proportional to the distance to the attention scores
# instead (ALiBi) let their models run on inputs longer than those of training. The module
# below computes its table once, up to `max_len`: choose it above the longest input you
# will feed the model.

# %% [markdown]
# ## 2. A module with a buffer
#
# The table is not learned, but it belongs to the model: it must move with
# `model.to("cuda")` and change dtype with `model.double()`. A plain attribute
# (`self.pe = table`) does neither; an `nn.Parameter` would be trained by the optimiser.
# `self.register_buffer("pe", table)` is the tool made for this. A buffer is saved in the
# `state_dict` by default; since the table is a pure function of `(max_len, d_model)`,
# `persistent=False` keeps it out of checkpoints (either choice works here).
#
# The forward pass adds the first `L` rows and applies dropout (the paper uses dropout
# 0.1 on these sums, section 5.4). A sequence longer than `max_len` has no table rows:
# raise a `ValueError` that says so, instead of an unreadable broadcasting error.
#
# **Exercise 2.** Complete `PositionalEncoding`: register the table as a buffer named `pe`,
# and write `forward(x)` = `dropout(x + pe[:L])`, raising `ValueError` when `L > max_len`.

# %% [markdown]
# **Stuck on `PositionalEncoding`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.5, and §5.4 for the dropout on the sums.
#
# <details><summary>Hint 1: a nudge</summary>
#
# The table is fixed, not learned, but it must move with the module to the GPU.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Register the table as a buffer in `__init__`; in `forward` add its first `L` rows to `x` (they broadcast over the batch), then apply dropout. Refuse sequences longer than `max_len` with a clear error.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# In `__init__`: `nn.Module.register_buffer(name, tensor, persistent=...)` with the name `"pe"` and the table from exercise 1. In `forward`: `L` is `x.size(1)`; compare it with `self.max_len` and raise `ValueError` first; the first `L` rows of the buffer have shape `(L, D)`, which broadcasts against `(B, L, D)`; `self.dropout` comes last, on the sum.
#
# </details>
#
# **Check yourself:** Why a buffer and not an `nn.Parameter`?
#
# <details><summary>Answer</summary>
#
# A parameter would be trained by the optimizer; a buffer moves with `.to(device)` but stays fixed.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "PositionalEncoding", "locked": false, "schema_version": 3, "solution": true}
class PositionalEncoding(nn.Module):
    """Add sinusoidal positions, then dropout (paper sections 3.5 and 5.4).

    Args:
        d_model: model size ``D``.
        dropout: dropout probability after the addition.
        max_len: longest sequence supported.

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.

    Raises:
        ValueError: in forward, if ``L > max_len``.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
        ### BEGIN SOLUTION
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model), persistent=False)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        length = x.size(1)
        if length > self.max_len:
            raise ValueError(f"sequence length {length} exceeds max_len={self.max_len}")
        return self.dropout(x + self.pe[:length])  # (B, L, D) + (L, D) broadcasts over the batch
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_PositionalEncoding", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def _test_PositionalEncoding():
    module = PositionalEncoding(16, dropout=0.0, max_len=32).eval()
    assert "pe" in dict(module.named_buffers()), "register the table with self.register_buffer('pe', ...)"
    assert not list(module.parameters()), "the table must not be a trainable parameter"
    x = torch.randn(2, 10, 16)
    out = module(x)
    assert out.shape == (2, 10, 16), f"expected (2, 10, 16), got {tuple(out.shape)}"
    assert torch.allclose(out, x + sinusoidal_positional_encoding(32, 16)[:10], atol=1e-6), "expected x + pe[:L]"
    assert module.double().pe.dtype == torch.float64, ".double() should convert the buffer too"
    try:
        module(torch.randn(1, 33, 16, dtype=torch.float64))
    except ValueError:
        pass
    else:
        raise AssertionError("a sequence longer than max_len should raise ValueError")


### BEGIN HIDDEN TESTS
from course_reference.checks import isolate as _isolate
from course_reference.checks import nb05 as _checks

_test_PositionalEncoding = _isolate(
    globals(), _test_PositionalEncoding, **_checks.upstream("sinusoidal_positional_encoding")
)
### END HIDDEN TESTS
_test_PositionalEncoding()
print("PositionalEncoding: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_PositionalEncoding_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): the buffer (not a parameter, not a plain attribute),
# its values, forward in float32 and float64, dropout in train() mode only, length 1 and
# length = max_len, and the error past max_len.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb05 as _checks

_checks.check_PositionalEncoding(globals())
### END HIDDEN TESTS

# %% [markdown]
# **Buffers and checkpoints.** What ends up in a `state_dict` is a choice the module makes:

# %%
persistent = nn.Module()
persistent.register_buffer("pe", torch.zeros(3))
print("persistent=True  (default) ->", list(persistent.state_dict()))
print(f"your PositionalEncoding    -> {list(PositionalEncoding(8).state_dict())} "
      "(either is fine; non-persistent keeps checkpoints small)")

# %% [markdown]
# ## 3. Token embeddings
#
# Token ids become vectors through an `nn.Embedding(vocab_size, d_model)` lookup table.
# The paper multiplies the embeddings by $\sqrt{d_{model}}$ (section 3.4). Whether that is
# a good size depends on how the table starts, so the scale and the initialisation go
# together:
#
# - `nn.Embedding` starts from $\mathcal{N}(0, 1)$: entries of size about 1, so the scaled
#   vectors have entries of size $\sqrt{D}$ (about 22 for $D = 512$), and the positional
#   encoding (entries in $[-1, 1]$, root mean square $1/\sqrt{2} \approx 0.71$) is
#   almost invisible next to them.
# - The paper shares the embedding matrix with the output layer, and implementations
#   initialise such matrices with small values. fairseq draws its embeddings from
#   $\mathcal{N}(0, 1/D)$ (variance $1/D$, standard deviation $1/\sqrt{D}$), so the factor
#   $\sqrt{D}$ brings the scaled vectors to entries of size about 1: the scale undoes the
#   initialisation, and the token vectors start at unit size whatever $D$ is, the same order
#   as the positional signal. Glorot/Xavier values (standard deviation $\sqrt{2 / (V + D)}$,
#   about 0.015 for $V = 8000$, $D = 512$) give entries of size about
#   $0.015 \cdot \sqrt{512} \approx 0.35$ after the scale: smaller, still of the same order.
#   Neither drowns the other.
#
# The paper states the factor without a reason; these two initialisations show what it
# suits. Notebook 06's `Transformer` re-initialises its embeddings with Xavier values. The
# cell after the exercise measures the three cases.
#
# **Exercise 3.** Complete `TokenEmbedding.forward`: `(B, L)` ids -> `(B, L, d_model)`,
# scaled by $\sqrt{d_{model}}$. Keep the attribute name `embedding`.

# %% [markdown]
# **Stuck on `TokenEmbedding`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.4 ("we multiply those weights by $\sqrt{d_{model}}$").
#
# <details><summary>Hint 1: a nudge</summary>
#
# A lookup table, then one multiplication.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# `nn.Embedding` maps ids to vectors; multiply them by $\sqrt{d_{model}}$ (with a small initialisation, as in notebook 06, this brings them to the size of the positional encoding).
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Calling the module `self.embedding` on the ids gives `(B, L, d_model)`; the factor is the square root of `self.d_model` (`math.sqrt`, a Python float, so the result keeps the dtype of the weights).
#
# </details>
#
# **Check yourself:** What dtype must `tokens` have?
#
# <details><summary>Answer</summary>
#
# An integer type (int64): they are indices into the table.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "TokenEmbedding", "locked": false, "schema_version": 3, "solution": true}
class TokenEmbedding(nn.Module):
    """Token ids -> vectors times sqrt(d_model) (paper section 3.4).

    Shape:
        forward(tokens ``(B, L)`` int64) -> ``(B, L, d_model)``.
    """

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return self.embedding(tokens) * math.sqrt(self.d_model)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_TokenEmbedding", "locked": true, "points": 1, "schema_version": 3, "solution": false}
emb = TokenEmbedding(10, 16)
tokens = torch.tensor([[1, 2, 3], [4, 0, 0]])
out = emb(tokens)
assert out.shape == (2, 3, 16), f"expected (B, L, d_model) = (2, 3, 16), got {tuple(out.shape)}"
assert torch.allclose(out, emb.embedding(tokens) * 4.0), "expected embedding(tokens) * sqrt(16)"
print("TokenEmbedding: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_TokenEmbedding_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): reference weights copied in, outputs and gradients in
# float32 and float64.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb05 as _checks

_checks.check_TokenEmbedding(globals())
### END HIDDEN TESTS

# %% [markdown]
# **Scale and initialisation, measured.** The root mean square of the entries of scaled
# token vectors, for $D = 512$ and a vocabulary of 8,000, next to the positional encoding's:

# %%
with torch.no_grad():
    ids = torch.randint(0, 8000, (4, 50))
    default = TokenEmbedding(8000, 512)  # nn.Embedding's N(0, 1) start
    xavier = TokenEmbedding(8000, 512)
    nn.init.xavier_uniform_(xavier.embedding.weight)  # what notebook 06 does
    fairseq = TokenEmbedding(8000, 512)
    nn.init.normal_(fairseq.embedding.weight, std=512**-0.5)  # N(0, 1/D), standard deviation D^-1/2, as fairseq does
    rms = {"N(0, 1) start": default(ids).pow(2).mean().sqrt().item(),
           "N(0, 1/D) start": fairseq(ids).pow(2).mean().sqrt().item(),
           "Xavier start": xavier(ids).pow(2).mean().sqrt().item(),
           "positional encoding": sinusoidal_positional_encoding(50, 512).pow(2).mean().sqrt().item()}
for label, value in rms.items():
    print(f"{label:>20}: root mean square {value:6.2f}")
print(f"Notice: with the default start the token vectors are {rms['N(0, 1) start'] / rms['positional encoding']:.0f}x "
      f"the positional signal; with N(0, 1/D) values {rms['N(0, 1/D) start'] / rms['positional encoding']:.1f}x, "
      f"with Xavier values {rms['Xavier start'] / rms['positional encoding']:.1f}x: "
      "the sqrt(d_model) scale suits a small initialisation.")

# %% [markdown]
# ## 4. Why it matters: order
#
# Run the same self-attention layer on a sentence and on the same sentence with its words
# shuffled. Without positions, the outputs are the same rows in shuffled order: the layer
# cannot tell the two sentences apart. With positional encodings added, they differ.

# %%
torch.manual_seed(0)
d_model = 32
layer = MultiHeadAttention(d_model, 4).eval()
embed = TokenEmbedding(20, d_model)
add_positions = PositionalEncoding(d_model, dropout=0.0).eval()
sentence = torch.tensor([[3, 7, 1, 12, 5]])
perm = torch.tensor([4, 2, 0, 3, 1])
with torch.no_grad():
    for label, encode in (("no positions", lambda t: embed(t)), ("with positions", lambda t: add_positions(embed(t)))):
        a, b = encode(sentence), encode(sentence[:, perm])
        out_a, out_b = layer(a, a, a)[0], layer(b, b, b)[0]
        gap = (out_a[:, perm] - out_b).abs().max().item()
        print(f"{label:15s}: max |attention(shuffled) - shuffled(attention)| = {gap:.2e}")
print("Notice: without positions the gap is rounding error (equivariant); with them, order matters.")

# %% [markdown]
# ## 5. Attention that reads positions: a reversed copy
#
# Section 4 showed that attention alone cannot tell word orders apart. Now give it a task
# that is *only* about order: copy a sequence of 8 random tokens **in reverse**. Output
# position $t$ must find input position $7 - t$, whatever the tokens are, so the model has
# to use the positional encoding to know where to look. The model is your
# `TokenEmbedding` and `PositionalEncoding`, two self-attention layers of 4 heads (with
# residual connections), and a linear layer that reads the token off each position.
# A few hundred steps of Adam train it in a few seconds.
#
# *Predict:* if it has learnt the task, what will the attention weights of the layer that
# fetches the answer look like, as a grid of queries by keys?

# %%
class ReverseCopy(nn.Module):
    """Embeddings + positions, self-attention layers with residuals, a linear read-out."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, length: int):
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, d_model)
        nn.init.xavier_uniform_(self.embed.embedding.weight)  # small start (section 3)
        self.positions = PositionalEncoding(d_model, dropout=0.0, max_len=length)
        self.layers = nn.ModuleList(MultiHeadAttention(d_model, num_heads) for _ in range(num_layers))
        self.read_out = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        x = self.positions(self.embed(tokens))
        weights = []  # one (B, h, L, L) tensor per layer
        for layer in self.layers:
            out, w = layer(x, x, x)
            x = x + out
            weights.append(w)
        return self.read_out(x), weights


torch.manual_seed(0)
VOCAB, LENGTH, LAYERS, HEADS = 12, 8, 2, 4
copier = ReverseCopy(VOCAB, 32, HEADS, LAYERS, LENGTH)
optimizer = torch.optim.Adam(copier.parameters(), lr=3e-3)
for _ in range(300):
    src = torch.randint(0, VOCAB, (64, LENGTH))
    logits, _ = copier(src)
    loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), src.flip(1).reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
copier.eval()
with torch.no_grad():
    test = torch.randint(0, VOCAB, (500, LENGTH))
    logits, _ = copier(test)
    accuracy = (logits.argmax(-1) == test.flip(1)).float().mean().item()
print(f"after 300 steps: loss {loss.item():.3f}, tokens reversed correctly on new sequences: {accuracy:.1%}")

# %% [markdown]
# **Every layer and every head.** One heatmap per (layer, head) for one test sequence: row
# = query (output position), column = key (input position), colour = attention weight.
# Look for the **anti-diagonal** (query $t$ on key $7 - t$): the head or layer that
# fetches the reversed token. Heads that spread their weight, or split the positions
# between them, share the work. The pattern is set mostly by the positions, not entirely:
# the scores are computed from token vectors plus positions, so the weights also move
# with the tokens the sequence holds. The cell prints by how much over the 500 test
# sequences; try another row of `test` to see it in the heatmaps.

# %%
sample = test[:1]
with torch.no_grad():
    _, weights = copier(sample)
fig, axes = plt.subplots(LAYERS, HEADS, figsize=(3.2 * HEADS, 3.0 * LAYERS), layout="constrained",
                         sharex=True, sharey=True, squeeze=False)
for layer_index, layer_weights in enumerate(weights):
    for head in range(HEADS):
        ax = axes[layer_index, head]
        sns.heatmap(layer_weights[0, head], ax=ax, cmap="viridis", vmin=0, vmax=1, square=True,
                    cbar=head == HEADS - 1, xticklabels=sample[0].tolist(), yticklabels=range(LENGTH))
        ax.set(title=f"layer {layer_index + 1}, head {head + 1}",
               xlabel="key (input token)" if layer_index == LAYERS - 1 else "",
               ylabel="query (output position)" if head == 0 else "")
fig.suptitle(f"Attention of the reversed-copy model on the input {sample[0].tolist()}")
plt.show()
anti = torch.stack([w[0, :, torch.arange(LENGTH), LENGTH - 1 - torch.arange(LENGTH)].mean(-1) for w in weights])
for layer_index, per_head in enumerate(anti.tolist()):
    print(f"layer {layer_index + 1}: mean weight on the anti-diagonal, per head: "
          + ", ".join(f"{v:.2f}" for v in per_head))
best = divmod(int(anti.argmax()), HEADS)
print(f"Notice: the clearest anti-diagonal is layer {best[0] + 1}, head {best[1] + 1} "
      f"({anti.max().item():.2f} of each query's weight on key 7 - t); a uniform head would put "
      f"1/{LENGTH} = {1 / LENGTH:.2f} there.")
with torch.no_grad():
    _, all_weights = copier(test)  # every test sequence: (500, h, L, L) per layer
spread = max((w.amax(0) - w.amin(0)).max().item() for w in all_weights)
best_mass = all_weights[best[0]][:, best[1], torch.arange(LENGTH), LENGTH - 1 - torch.arange(LENGTH)].mean(-1)
print(f"Over the {len(test)} test sequences one weight varies by up to {spread:.2f}, and that head's "
      f"anti-diagonal mass ranges from {best_mass.min().item():.2f} to {best_mass.max().item():.2f}: "
      "positions set the pattern, the tokens move it.")

# %% [markdown]
# ## In your own words
#
# Answer in a few sentences each, in the cell below each question; where a question asks for your own
# numbers, quote them from your run. These answers are graded by hand.

# %% [markdown]
# **Question 1** (2 points). Without positional information, attention cannot tell "dog bites man"
# from "man bites dog" (section 4). Explain why from what self-attention computes.

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_order", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# Each output is a weighted sum over all (key, value) pairs, with weights from dot products of the
# token vectors: nothing in it depends on where a token sits. Permuting the input tokens permutes the
# outputs the same way (permutation equivariance), so "dog" gets the same vector in both sentences,
# and so does "man"; only their places in the list differ. Any meaning carried by order is lost.
# Adding a position vector makes the same word at different positions a different input.

# %% [markdown]
# **Question 2** (2 points). Why use sines and cosines at geometrically spaced frequencies rather than
# adding the position number itself (0, 1, 2, ...) to every feature?

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_sinusoids", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# The raw position grows without bound: at position 500 it would swamp embeddings of size about 1,
# and the further a sentence runs, the larger the numbers the first layer must cope with. (Positions past
# the training length give vectors never seen in training under either scheme, sinusoids included, as
# section 1 says; that is not what separates them.) Sinusoids stay in $[-1, 1]$; the
# many frequencies, from fast to slow, give every position a distinct code (like the hands of a
# clock); and for each frequency, the encoding of position $p + k$ is a fixed rotation of that of $p$,
# so a relative offset is easy for attention to read from dot products.
