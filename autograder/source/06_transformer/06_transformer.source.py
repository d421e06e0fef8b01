# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · The Transformer, encoder and decoder
#
# Every piece is ready: attention (02), heads (03), masks (04), positions and embeddings
# (05). This notebook assembles them into the model of Vaswani et al. (2017), figure 1:
#
# ```
#  source tokens (B, S)                      target tokens, shifted right (B, T)
#        │ src_embed · √D + positional              │ tgt_embed · √D + positional
#        ▼ (B, S, D)                                ▼ (B, T, D)
#  ┌─ Encoder × N ──────────────┐           ┌─ Decoder × N ─────────────────────────┐
#  │ self-attention (pad mask)  │           │ masked self-attention (pad & causal)  │
#  │ add & norm                 │  memory   │ add & norm                            │
#  │ feed-forward               │──(B,S,D)─▶│ cross-attention: Q from decoder,      │
#  │ add & norm                 │           │   K and V from memory (pad mask)      │
#  └────────────────────────────┘           │ add & norm, feed-forward, add & norm  │
#                                           └───────────────────────────────────────┘
#                                                   │ (B, T, D)
#                                                   ▼ generator: Linear(D, V_tgt)
#                                             logits (B, T, V_tgt)
# ```
#
# **Exercises:** `PositionwiseFeedForward`, `layer_norm` (by hand, to see what
# `nn.LayerNorm` computes), `EncoderLayer`, `DecoderLayer`, `Encoder`, `Decoder`,
# `Transformer`. Each module's `__init__` is given, with the attribute names of the paper's
# parts (so that weights can be loaded by name, as PyTorch's `state_dict` does); you write
# the `forward` passes.
# `course_blocks.py` (beside this notebook) holds the course's reference code of
# notebooks 01-05.

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
        "06_transformer"
    )
    PROVIDED = ["course_blocks.py"]  # reference code of notebooks 01-05
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
import warnings

import matplotlib.pyplot as plt
import seaborn as sns
import torch
import torch.nn.functional as F
from course_blocks import (
    MultiHeadAttention,
    PositionalEncoding,
    TokenEmbedding,
    make_causal_mask,
    make_decoder_mask,
    make_padding_mask,
)
from torch import nn

torch.manual_seed(0)
sns.set_theme(style="white", palette="colorblind")

# %% [markdown]
# ## 1. Position-wise feed-forward
#
# After attention has mixed information *across* positions, each position is processed
# on its own by the same two-layer network (section 3.3, equation 2):
#
# $$\mathrm{FFN}(x) = \max(0,\; xW_1 + b_1)\,W_2 + b_2$$
#
# The inner size $d_{ff}$ is larger than $D$ (2048 vs 512 in the base model): the layer
# widens, applies a ReLU, and projects back. `nn.Linear` acts on the last axis, so one
# call handles every position of every sentence at once. Dropout goes on the hidden
# activations (as in `nn.TransformerEncoderLayer`).
#
# **Exercise 1.** Write `forward`: widen with `w_1`, apply the ReLU, drop out some hidden
# activations, and project back to $D$ with `w_2`.

# %% [markdown]
# **Stuck on `PositionwiseFeedForward`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.3, Eq. (2).
#
# <details><summary>Hint 1: a nudge</summary>
#
# Two linear layers with a ReLU between them, applied to every position on its own.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Eq. (2) is one network applied to each position: it widens each vector to `d_ff`, keeps the positive part, and projects back to `d_model`. Dropout acts on the wide hidden activations, as the text above says.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# The module already owns its pieces (two linear layers and a dropout, built in `__init__`); the ReLU is a function of `torch` or `torch.nn.functional`. Their order is that of Eq. (2) read from the inside out, and the text above says where the dropout goes. Shapes: `(B, L, D)` -> `(B, L, d_ff)` -> `(B, L, D)`.
#
# </details>
#
# **Check yourself:** Why is it called position-wise?
#
# <details><summary>Answer</summary>
#
# `nn.Linear` acts on the last axis only, so each position is transformed independently with the same weights; positions do not mix here (attention does that).
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "PositionwiseFeedForward", "locked": false, "schema_version": 3, "solution": true}
class PositionwiseFeedForward(nn.Module):
    """Position-wise feed-forward network, Vaswani et al. (2017) section 3.3, eq. (2).

    Args:
        d_model: input and output size ``D``.
        d_ff: inner size.
        dropout: dropout probability on the inner activations (training mode only).

    Shape:
        forward(x ``(B, L, D)``) -> ``(B, L, D)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))  # (B, L, D)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_PositionwiseFeedForward", "locked": true, "points": 1, "schema_version": 3, "solution": false}
ffn = PositionwiseFeedForward(8, 32, dropout=0.0)
x = torch.randn(2, 5, 8)
out = ffn(x)
assert out.shape == (2, 5, 8), f"expected (B, L, D) = (2, 5, 8), got {tuple(out.shape)}"
assert torch.allclose(ffn(x[:, 3:4]), out[:, 3:4], atol=1e-6), "each position must be processed on its own"
with torch.no_grad():
    ffn.w_1.weight.fill_(-1.0)  # every hidden unit negative for a positive input...
    ffn.w_1.bias.zero_()
assert torch.allclose(ffn(x.abs()), ffn.w_2.bias.expand(2, 5, 8)), (
    "with all hidden pre-activations negative the output should be w_2's bias: is there a ReLU between w_1 and w_2?"
)
print("PositionwiseFeedForward: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_PositionwiseFeedForward_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): reference weights, several shapes; dropout in train() only,
# on the hidden activations (compared with the reference's under one random seed).
### BEGIN HIDDEN TESTS
from course_reference.checks import nb06 as _checks

_checks.check_PositionwiseFeedForward(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 2. Layer normalisation
#
# Every sub-layer of the Transformer ends in a **layer normalisation** (Ba et al., 2016;
# the paper's section 3.1). For each position's vector $x \in \mathbb{R}^D$ on its own:
#
# $$\mu = \frac{1}{D}\sum_{j=1}^{D} x_j, \qquad
#   \sigma^2 = \frac{1}{D}\sum_{j=1}^{D} (x_j - \mu)^2, \qquad
#   \mathrm{LayerNorm}(x) = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} \odot \gamma + \beta$$
#
# The vector is centred and scaled to unit variance over its own $D$ features, then a
# learned **gain** $\gamma$ (`weight`) and **bias** $\beta$ (`bias`), one value per feature,
# let the model undo the normalisation where that helps. Three details are easy to get wrong:
# $\sigma^2$ divides by $D$ (the *biased* variance, not the $D-1$ that `x.var()` and
# `x.std()` use by default); $\epsilon$ (1e-5 in PyTorch) goes *inside* the square root,
# where it keeps a near-constant vector from being divided by almost zero; and the
# statistics run over the **last axis** only.
#
# **Why not BatchNorm?** Batch normalisation computes $\mu$ and $\sigma^2$ per *feature*,
# over every vector of the batch. In a batch of sentences padded to one length, those
# statistics include the padding positions and the other sentences, so a token's output
# depends on what else is in the batch, and on the padding. Layer normalisation looks at
# one vector at a time: the cell below changes only the padding of a batch and compares.
#
# **Why residual connections?** A sub-layer computes $x + f(x)$, so its gradient with
# respect to $x$ is $I + f'(x)$: in a stack of such sub-layers with nothing else on the skip
# path, like the toy stack below (no normalisation), the identity term carries the signal
# backwards through any number of layers, where a plain stack multiplies many small
# Jacobians. The second half of the cell measures the gradient that reaches the input of a
# deep stack, with and without the residual path. (A real layer adds a normalisation; where
# it sits decides whether that identity path stays clean: section 3.)
#
# **Exercise 2.** Write `layer_norm(x, weight, bias, eps=1e-5)` by hand (no built-in
# normalisation), equal to `F.layer_norm(x, (D,), weight, bias, eps)`.

# %% [markdown]
# **Stuck on `layer_norm`?** Open one hint at a time. Paper: [Ba et al., 2016, *Layer Normalization*](https://arxiv.org/abs/1607.06450), eq. (4); [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), §3.1.
#
# <details><summary>Hint 1: a nudge</summary>
#
# Two statistics per vector, both over the last axis with `keepdim=True` so they broadcast back.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# `mean` over `dim=-1`; the variance of `x - mean` over `dim=-1`, dividing by `D` (`unbiased=False`, or `.square().mean(-1)`); then normalise, scale by `weight`, shift by `bias`.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Look up `Tensor.mean` and `Tensor.var` (its `unbiased` or `correction` argument; or take the mean of the squared deviations) over the last axis, then `torch.sqrt`; their `keepdim` argument keeps the `(..., 1)` shape that broadcasts against `x`. The formula: $(x - \mu) / \sqrt{\sigma^2 + \epsilon} \cdot w + b$.
#
# </details>
#
# **Check yourself:** A vector whose features are all equal: what does LayerNorm return for it, and why does that need $\epsilon$?
#
# <details><summary>Answer</summary>
#
# Its variance is 0, so `x - mean` is 0 and the normalised part is `0 / sqrt(eps) = 0`: the output is `bias`. Without $\epsilon$ it would be `0 / 0 = NaN`.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "layer_norm", "locked": false, "schema_version": 3, "solution": true}
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Layer normalisation over the last axis, Ba et al. (2016) eq. (4); Vaswani et al. (2017) section 3.1.

    Args:
        x: ``(..., D)`` float tensor.
        weight, bias: ``(D,)``, the learned gain and bias.
        eps: added to the variance, inside the square root.

    Returns:
        ``(..., D)``, the dtype of ``x``: each vector centred, divided by its standard
        deviation (biased: divided by ``D``), times ``weight``, plus ``bias``.
    """
    ### BEGIN SOLUTION
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).square().mean(dim=-1, keepdim=True)  # biased: divided by D
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_layer_norm", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = torch.randn(2, 5, 8) * 4 + 3
weight, bias = torch.ones(8), torch.zeros(8)
y = layer_norm(x, weight, bias)
assert y.shape == x.shape and y.dtype == x.dtype, f"expected shape {tuple(x.shape)} float32, got {tuple(y.shape)} {y.dtype}"
assert torch.allclose(y.mean(-1), torch.zeros(2, 5), atol=1e-5), "each vector should have mean 0 over its features"
assert torch.allclose(y.var(-1, unbiased=False), torch.ones(2, 5), atol=1e-3), (
    "each vector should have (biased) variance 1 over its features: divide by sqrt(var + eps), var over the last axis"
)
gain, shift = torch.linspace(0.5, 2.0, 8), torch.linspace(-1.0, 1.0, 8)
assert torch.allclose(layer_norm(x, gain, shift), y * gain + shift, atol=1e-5), "scale by weight, then add bias"
print("layer_norm: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_layer_norm_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): against the reference on several shapes, dtypes and eps.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb06 as _checks

_checks.check_layer_norm(globals())
### END HIDDEN TESTS

# %% [markdown]
# **LayerNorm against BatchNorm, and residual paths, measured.** First, a batch of two
# sentences; the second has two padding positions. Only the values at those padding
# positions change between the two runs. Then, the norm of the gradient that reaches the
# input of a stack of `tanh(Linear)` layers, with and without residual connections: without
# them it shrinks by orders of magnitude as the stack deepens; with them it does not vanish
# (in this toy stack it even grows, since nothing keeps the scale in check: in the
# Transformer, the LayerNorm after every sub-layer does).
#
# *Predict, then run:* which of LayerNorm and BatchNorm changes the outputs at the *real*
# positions of the second sentence when only its padding changes?

# %%
torch.manual_seed(0)
width = 16
x = torch.randn(2, 4, width)
real = torch.tensor([[True, True, True, True], [True, True, False, False]])
pad_zero, pad_five = x.clone(), x.clone()
pad_zero[~real], pad_five[~real] = 0.0, 5.0


def batch_norm(t):
    """BatchNorm statistics per feature over every position of the batch, padding included."""
    return F.batch_norm(t.reshape(-1, width), None, None, training=True).reshape(t.shape)


ones, zeros = torch.ones(width), torch.zeros(width)
for name, norm in (("BatchNorm", batch_norm), ("LayerNorm (yours)", lambda t: layer_norm(t, ones, zeros))):
    change = (norm(pad_zero) - norm(pad_five))[real].abs().max().item()
    print(f"{name:18s}: largest change of a REAL token's output when only the padding changes = {change:.3g}")

rows = []
for depth in (2, 8, 16, 32):
    for residual in (False, True):
        torch.manual_seed(1)
        layers = [nn.Linear(width, width) for _ in range(depth)]
        h0 = torch.randn(8, width, requires_grad=True)
        h = h0
        for layer in layers:
            h = h + torch.tanh(layer(h)) if residual else torch.tanh(layer(h))
        h.sum().backward()
        rows.append((depth, residual, h0.grad.norm().item()))
fig, ax = plt.subplots(figsize=(5.5, 3.2))
for residual, style in ((False, "o-"), (True, "s-")):
    ax.semilogy([d for d, r, _ in rows if r == residual], [g + 1e-30 for _, r, g in rows if r == residual], style,
                label="x + f(x) (residual)" if residual else "f(x) (plain stack)")
ax.set(xlabel="number of layers", ylabel="gradient norm at the input", title="Gradient reaching the input")
ax.legend()
plt.tight_layout()
plt.show()
for depth, residual, grad in rows:
    print(f"{depth:3d} layers, {'residual' if residual else 'plain   '}: |d loss / d input| = {grad:.3g}")
plain, residual = (next(g for d, r, g in rows if d == 32 and r == kind) for kind in (False, True))
print(f"Notice: through 32 layers the plain stack passes {plain:.1e} of gradient to its input, the residual "
      f"stack {residual:.3g}; and LayerNorm did not move the real tokens' outputs when only the padding changed.")

# %% [markdown]
# ## 3. Add & norm: the encoder layer
#
# Each sub-layer (attention, feed-forward) is wrapped in a **residual connection** and
# followed by **layer normalisation** (section 3.1):
#
# $$x \leftarrow \mathrm{LayerNorm}\big(x + \mathrm{Dropout}(\mathrm{Sublayer}(x))\big)$$
#
# The residual connection lets each sub-layer learn a correction to its input and gives the
# gradient a term that skips the sub-layer; the normalisation keeps each position's vector
# at a stable scale. This is the paper's **post-LN** order, and in it the skip path is not
# clean: every LayerNorm sits on it, so the signal passing back to the first layers is
# rescaled by each normalisation on the way. **Pre-LN**, `x + Sublayer(LayerNorm(x))`,
# used by many later models, moves the norm off the skip path and leaves a pure identity
# path from the output to the input (notebook 08); that makes deep stacks more stable to
# train and tolerant of higher learning rates (Xiong et al., 2020). `nn.TransformerEncoderLayer`
# offers both (`norm_first`). Here we follow the paper.
#
# An encoder layer is self-attention (every source position attends to every non-padding
# source position), add & norm, feed-forward, add & norm. The attention module returns
# `(output, weights)`; keep the output.
#
# **Exercise 3.** Write `EncoderLayer.forward(x, src_mask)` with `norm1` after attention
# and `norm2` after the feed-forward network.

# %% [markdown]
# **Stuck on `EncoderLayer`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.1, "LayerNorm(x + Sublayer(x))", and §5.4 (residual dropout).
#
# <details><summary>Hint 1: a nudge</summary>
#
# Two sublayers, each wrapped the same way: dropout on its output, add the input, normalise.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Post-LN as in the paper (§3.1): each sub-layer's output, after dropout (§5.4), is added to that sub-layer's input, and the normalisation comes after the sum, not before it. The encoder layer repeats this step for its two sub-layers; the second starts from the result of the first.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# The module owns every piece: the two sub-layers `self.self_attn` (self-attention: query, key and value are all `x`; it returns `(output, weights)`, keep the output) and `self.feed_forward`, one LayerNorm per sub-layer (`self.norm1` belongs to the attention, `self.norm2` to the feed-forward network), and one `self.dropout` that serves both. The order of the two sub-layers is Figure 1's.
#
# </details>
#
# **Check yourself:** Where would pre-LN put the normalisation, and is it the same function?
#
# <details><summary>Answer</summary>
#
# Pre-LN computes `x + sublayer(norm(x))`; it trains more stably in deep stacks, but with the same weights it gives different outputs from the paper's post-LN `norm(x + sublayer(x))`: a different function, not a reordering.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "EncoderLayer", "locked": false, "schema_version": 3, "solution": true}
class EncoderLayer(nn.Module):
    """One encoder layer (section 3.1): self-attention and feed-forward, each post-LN.

    Args:
        d_model, num_heads, d_ff: sizes; dropout: on each sub-layer output and inside
            attention and the feed-forward network.

    Shape:
        forward(x ``(B, S, D)``, src_mask bool broadcastable to ``(B, h, S, S)``,
        True = attend) -> ``(B, S, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        ### BEGIN SOLUTION
        attended, _ = self.self_attn(x, x, x, src_mask)  # (B, S, D)
        x = self.norm1(x + self.dropout(attended))
        return self.norm2(x + self.dropout(self.feed_forward(x)))
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_EncoderLayer", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def _test_EncoderLayer():
    layer = EncoderLayer(16, 4, 32, dropout=0.0).eval()
    x = torch.randn(2, 6, 16)
    src_mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :]  # (B, 1, 1, S)
    out = layer(x, src_mask)
    assert out.shape == (2, 6, 16), f"expected (B, S, D) = (2, 6, 16), got {tuple(out.shape)}"
    assert torch.allclose(out.mean(-1), torch.zeros(2, 6), atol=1e-5), (
        "each output vector should have mean 0 over features: the layer must end with norm2"
    )
    changed = x.clone()
    changed[1, 4:] = torch.randn(2, 16)  # new content at sentence 2's padding positions
    assert torch.allclose(layer(changed, src_mask)[1, :4], out[1, :4], atol=1e-5), (
        "real tokens should not see padding: pass src_mask to the self-attention"
    )


### BEGIN HIDDEN TESTS
from course_reference.checks import isolate as _isolate
from course_reference.checks import nb06 as _checks

_test_EncoderLayer = _isolate(globals(), _test_EncoderLayer, **_checks.upstream("PositionwiseFeedForward"))
### END HIDDEN TESTS
_test_EncoderLayer()
print("EncoderLayer: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_EncoderLayer_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): reference weights copied in by name, padding masks,
# several sizes; dropout in train() only, on each sub-layer's output before the sum (compared
# with the reference's under one random seed). Uses the reference PositionwiseFeedForward.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb06 as _checks

_checks.check_EncoderLayer(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 4. The decoder layer
#
# A decoder layer has three sub-layers, each with add & norm:
#
# 1. **masked self-attention** over the target so far, with the decoder mask (padding AND
#    causal, notebook 04): position $t$ may look at positions $\le t$ only;
# 2. **cross-attention** ("encoder-decoder attention", section 3.2.3): the queries come
#    from the decoder, the keys and values from the encoder's output `memory`; the
#    source padding mask hides the source's padding;
# 3. the feed-forward network.
#
# **Exercise 4.** Write `DecoderLayer.forward(x, memory, src_mask, tgt_mask)` with `norm1`,
# `norm2`, `norm3` after the three sub-layers.

# %% [markdown]
# **Stuck on `DecoderLayer`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.1 (the decoder's third sublayer) and §3.2.3.
#
# <details><summary>Hint 1: a nudge</summary>
#
# Three sublayers now: masked self-attention, attention over the encoder's output, feed-forward.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Cross-attention takes its queries from the decoder (`x`) and its keys and values from `memory`, with `src_mask` (padding of the source). Self-attention uses `tgt_mask`.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Three residual steps of the form norm(x + dropout(sublayer(x))), with `norm1`, `norm2`, `norm3` in order. Which mask goes where: `tgt_mask` (causal and padding) on the self-attention over `x`; `src_mask` on the cross-attention, whose keys and values are `memory` (the encoder's output), its queries `x`.
#
# </details>
#
# **Check yourself:** In cross-attention the weights have shape `(B, h, T, S)`. What are `T` and `S`?
#
# <details><summary>Answer</summary>
#
# `T` is the target (decoder) length, the queries; `S` is the source length, the keys.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "DecoderLayer", "locked": false, "schema_version": 3, "solution": true}
class DecoderLayer(nn.Module):
    """One decoder layer (section 3.1): masked self-attention, cross-attention, feed-forward.

    Shape:
        forward(x ``(B, T, D)``, memory ``(B, S, D)``, src_mask broadcastable to
        ``(B, h, T, S)``, tgt_mask broadcastable to ``(B, h, T, T)``) -> ``(B, T, D)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        ### BEGIN SOLUTION
        attended, _ = self.self_attn(x, x, x, tgt_mask)  # (B, T, D)
        x = self.norm1(x + self.dropout(attended))
        attended, _ = self.cross_attn(x, memory, memory, src_mask)  # queries (B, T, D), keys (B, S, D)
        x = self.norm2(x + self.dropout(attended))
        return self.norm3(x + self.dropout(self.feed_forward(x)))
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_DecoderLayer", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def _test_DecoderLayer():
    layer = DecoderLayer(16, 4, 32, dropout=0.0).eval()
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    tgt_mask = make_causal_mask(5)  # (1, 1, T, T)
    src_mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    out = layer(x, memory, src_mask, tgt_mask)
    assert out.shape == (2, 5, 16), f"expected (B, T, D) = (2, 5, 16), got {tuple(out.shape)}"
    later = x.clone()
    later[:, 3:] = torch.randn(2, 2, 16)  # change target positions 3 and 4
    assert torch.allclose(layer(later, memory, src_mask, tgt_mask)[:, :3], out[:, :3], atol=1e-5), (
        "positions 0-2 changed when only positions 3-4 did: apply tgt_mask in the self-attention"
    )
    other = torch.randn(2, 7, 16)
    assert not torch.allclose(layer(x, other, src_mask, tgt_mask), out, atol=1e-4), (
        "the output does not depend on memory: cross-attention takes keys and values from memory"
    )


### BEGIN HIDDEN TESTS
from course_reference.checks import isolate as _isolate
from course_reference.checks import nb06 as _checks

_test_DecoderLayer = _isolate(globals(), _test_DecoderLayer, **_checks.upstream("PositionwiseFeedForward"))
### END HIDDEN TESTS
_test_DecoderLayer()
print("DecoderLayer: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_DecoderLayer_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): reference weights, padding + causal masks, source and
# target of equal and of different lengths; dropout in train() only, on each sub-layer's output
# before the sum (compared with the reference's under one random seed).
### BEGIN HIDDEN TESTS
from course_reference.checks import nb06 as _checks

_checks.check_DecoderLayer(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Stacks of layers
#
# The encoder is $N$ encoder layers applied one after another; the decoder is $N$ decoder
# layers, each of which attends to the same `memory` (the encoder's last output). The
# layers are **independent**: each has its own weights. Two traps:
#
# - `nn.ModuleList([layer] * N)` repeats ONE layer object $N$ times, so all "layers" share
#   one set of weights. Build a new layer for each slot.
# - A plain Python list of layers hides them from `model.parameters()` and `.to(device)`;
#   `nn.ModuleList` registers them.
#
# The inputs are already embedded, `(B, L, D)`, and the stacks return the last layer's
# output as it is (no final LayerNorm: that belongs to pre-LN models).
#
# **Exercise 5.** Write `Encoder.forward` and `Decoder.forward`.

# %% [markdown]
# **Stuck on `Encoder`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.1 ("a stack of N = 6 identical layers").
#
# <details><summary>Hint 1: a nudge</summary>
#
# Identical layers, but each with its own weights, applied one after another.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# `nn.ModuleList` of `num_layers` separate `EncoderLayer`s; in `forward`, feed each layer the previous layer's output.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# A Python `for` loop over `self.layers` (an `nn.ModuleList`), feeding each layer the previous one's output and the same `src_mask`. No normalisation after the loop.
#
# </details>
#
# **Check yourself:** Why is `nn.ModuleList([layer] * n)` wrong?
#
# <details><summary>Answer</summary>
#
# It repeats the same module object n times: one set of weights shared by every layer, a different model with fewer parameters.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "Encoder", "locked": false, "schema_version": 3, "solution": true}
class Encoder(nn.Module):
    """``num_layers`` independent ``EncoderLayer``s in sequence (section 3.1).

    Shape:
        forward(x ``(B, S, D)`` embedded, src_mask) -> ``(B, S, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        ### BEGIN SOLUTION
        for layer in self.layers:
            x = layer(x, src_mask)
        return x
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_Encoder", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def _test_Encoder():
    encoder = Encoder(3, 16, 4, 32, dropout=0.0).eval()
    assert isinstance(encoder.layers, nn.ModuleList) and len(encoder.layers) == 3, "layers: nn.ModuleList of 3 layers"
    x = torch.randn(2, 6, 16)
    out = encoder(x, None)
    assert out.shape == (2, 6, 16), f"expected (B, S, D) = (2, 6, 16), got {tuple(out.shape)}"
    by_hand = x
    for layer in encoder.layers:
        by_hand = layer(by_hand, None)
    assert torch.allclose(out, by_hand, atol=1e-5), "each layer's output should be the next layer's input"


### BEGIN HIDDEN TESTS
from course_reference.checks import isolate as _isolate
from course_reference.checks import nb06 as _checks

_test_Encoder = _isolate(globals(), _test_Encoder, **_checks.upstream("PositionwiseFeedForward", "EncoderLayer"))
### END HIDDEN TESTS
_test_Encoder()
print("Encoder: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_Encoder_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): 1 to 3 layers with reference weights, padding masks.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb06 as _checks

_checks.check_Encoder(globals())
### END HIDDEN TESTS

# %% [markdown]
# **Stuck on `Decoder`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.1 (the decoder stack).
#
# <details><summary>Hint 1: a nudge</summary>
#
# Like the encoder stack, with the encoder's output passed to every layer.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Each `DecoderLayer` gets the previous layer's output plus the same `memory` and both masks.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# The same loop as `Encoder`, each layer also given `memory`, `src_mask` and `tgt_mask` (the same for every layer).
#
# </details>
#
# **Check yourself:** Which input changes from layer to layer, and which stays the same?
#
# <details><summary>Answer</summary>
#
# `x` changes (each layer refines it); `memory` and the masks are the same for every layer.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "Decoder", "locked": false, "schema_version": 3, "solution": true}
class Decoder(nn.Module):
    """``num_layers`` independent ``DecoderLayer``s in sequence, all attending to ``memory``.

    Shape:
        forward(x ``(B, T, D)`` embedded, memory ``(B, S, D)``, src_mask, tgt_mask) -> ``(B, T, D)``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        ### BEGIN SOLUTION
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return x
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_Decoder", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def _test_Decoder():
    decoder = Decoder(2, 16, 4, 32, dropout=0.0).eval()
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    out = decoder(x, memory, None, make_causal_mask(5))
    assert out.shape == (2, 5, 16), f"expected (B, T, D) = (2, 5, 16), got {tuple(out.shape)}"
    by_hand = decoder.layers[1](decoder.layers[0](x, memory, None, make_causal_mask(5)), memory, None,
                                make_causal_mask(5))
    assert torch.allclose(out, by_hand, atol=1e-5), "each layer's output should be the next layer's input"


### BEGIN HIDDEN TESTS
from course_reference.checks import isolate as _isolate
from course_reference.checks import nb06 as _checks

_test_Decoder = _isolate(globals(), _test_Decoder, **_checks.upstream("PositionwiseFeedForward", "DecoderLayer"))
### END HIDDEN TESTS
_test_Decoder()
print("Decoder: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_Decoder_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): 1 to 3 layers with reference weights, both masks.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb06 as _checks

_checks.check_Decoder(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 6. The whole model
#
# `Transformer` wires everything together:
#
# - `encode(src, src_mask)`: `src_embed` (token vectors times $\sqrt{D}$), then
#   `positional_encoding` (adds the table, then dropout), then the encoder → `memory`;
# - `decode(tgt, memory, src_mask, tgt_mask)`: the same for the target side with
#   `tgt_embed`, through the decoder → `(B, T, D)`;
# - `forward(src, tgt)`: builds the masks from `pad_id` (the source padding mask
#   `(B, 1, 1, S)` for encoder self-attention and cross-attention, the decoder mask
#   `(B, 1, T, T)`), encodes, decodes, and applies `generator`, a linear layer to
#   vocabulary-sized **logits** (no softmax: the loss applies it).
#
# Why the target mask needs its padding part too, when padding sits at the end: a real
# position $i$ only sees keys $j \le i$, which are all real tokens, so a causal-only mask
# leaves every real position's output unchanged, and the loss (which ignores padded labels)
# would not notice. The padded positions still get outputs, and with a causal-only mask
# their queries attend to padding tokens; with padding anywhere else (a left-padded batch,
# as batched generation uses) real positions would too. The decoder mask states the rule
# once for every position: no query, real or padded, attends to a padding token. That rule
# is what `forward` implements, so its output is defined at every position, padded ones
# included.
#
# One `PositionalEncoding` serves both sides (it holds no weights, only the table). The
# paper ties three matrices (section 3.4): "we share the same weight matrix between the two
# embedding layers and the pre-softmax linear transformation". That works because its
# English-German model uses one vocabulary for both languages (byte-pair encoding shared
# between source and target, section 5.1), so a token's source vector, its target vector and
# its output scores all come from one row of one $(V, D)$ matrix. By default we keep them
# separate, so that each module owns its weights; `tie_embeddings=True` (already in
# `__init__`) shares the target embedding with the generator: the two-way tie, which also
# works for two different vocabularies (notebook 07's is shared, so it could tie all three).
# Separate weights cost `tgt_vocab_size` x $D$ parameters (about 1 M in notebook 07's CPU
# model, 4 M in its GPU model); notebook 07 can train either way.
#
# `__init__` also re-initialises every weight matrix with Glorot/Xavier uniform values, as
# `nn.Transformer` does: `nn.Embedding`'s default $\mathcal{N}(0, 1)$ times $\sqrt{D}$ would
# give token vectors $\sqrt{2D}$ times the size of the positional signal (entries of size
# $\sqrt{D}$ against the table's root mean square $1/\sqrt{2}$): 32 times for $D = 512$, as
# notebook 05 measured.
#
# **Exercise 6.** Write `encode`, `decode` and `forward`.

# %% [markdown]
# **Stuck on `Transformer`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3, Figure 1, and §3.4.
#
# <details><summary>Hint 1: a nudge</summary>
#
# Follow Figure 1: embed and add positions on both sides, encode the source, decode the target against it, project to the vocabulary.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Read Figure 1 from the bottom up: on each side the tokens become vectors (§3.4), receive their positions (§3.5), and go through their stack; the decoder's stack also reads the encoder's output. `forward` makes the masks of notebook 04 from the token ids and returns raw logits, no softmax (the loss applies it).
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# The masks come from notebook 04's functions, with `self.pad_id`: the source's padding mask `(B, 1, 1, S)` (used by the encoder and by the cross-attention) and the target's padding-and-causal mask `(B, 1, T, T)`. `forward` can reuse the two methods you write first; `self.generator` is the linear layer that makes logits from vectors of size $D$.
#
# </details>
#
# **Check yourself:** Why does `forward` return logits rather than probabilities?
#
# <details><summary>Answer</summary>
#
# The loss applies `log_softmax` itself, which is more accurate than taking the log of a softmax; greedy decoding only needs the argmax, which is the same either way.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "Transformer", "locked": false, "schema_version": 3, "solution": true}
class Transformer(nn.Module):
    """The encoder-decoder Transformer, Vaswani et al. (2017) figure 1, batch-first.

    Args:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        d_model, num_heads, num_layers, d_ff, dropout: the paper's D, h, N, d_ff, P_drop.
        max_len: the longest sequence the positional encoding covers.
        pad_id: the padding id of both sides; ``forward`` masks it.
        tie_embeddings: share one matrix between ``tgt_embed`` and ``generator`` (paper
            section 3.4); default False, each owns its weights.

    Shape:
        encode(src ``(B, S)`` int64, src_mask) -> memory ``(B, S, D)``;
        decode(tgt ``(B, T)`` int64, memory, src_mask, tgt_mask) -> ``(B, T, D)``;
        forward(src ``(B, S)``, tgt ``(B, T)``) -> logits ``(B, T, tgt_vocab_size)``.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        pad_id: int = 0,
        tie_embeddings: bool = False,
    ):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = TokenEmbedding(src_vocab_size, d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model)
        self.positional_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        if tie_embeddings:  # paper section 3.4: the generator reuses the target embedding matrix (V, D)
            self.generator.weight = self.tgt_embed.embedding.weight
        for param in self.parameters():
            if param.dim() > 1:
                nn.init.xavier_uniform_(param)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        ### BEGIN SOLUTION
        return self.encoder(self.positional_encoding(self.src_embed(src)), src_mask)  # (B, S, D)
        ### END SOLUTION

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        ### BEGIN SOLUTION
        return self.decoder(self.positional_encoding(self.tgt_embed(tgt)), memory, src_mask, tgt_mask)  # (B, T, D)
        ### END SOLUTION

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        src_mask = make_padding_mask(src, self.pad_id)  # (B, 1, 1, S)
        tgt_mask = make_decoder_mask(tgt, self.pad_id)  # (B, 1, T, T)
        memory = self.encode(src, src_mask)
        return self.generator(self.decode(tgt, memory, src_mask, tgt_mask))  # (B, T, V_tgt)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_Transformer", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def _test_Transformer():
    model = Transformer(20, 30, d_model=16, num_heads=4, num_layers=2, d_ff=32, dropout=0.0).eval()
    src = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])  # pad_id = 0
    tgt = torch.tensor([[1, 4, 5], [1, 7, 0]])
    logits = model(src, tgt)
    assert logits.shape == (2, 3, 30), f"expected (B, T, V_tgt) = (2, 3, 30), got {tuple(logits.shape)}"
    changed = tgt.clone()
    changed[:, 2] = 9  # a different last target token
    assert torch.allclose(model(src, changed)[:, :2], logits[:, :2], atol=1e-5), (
        "logits at positions 0-1 changed when only target position 2 did: forward must use the causal mask"
    )
    padded = src.clone()
    padded[1, 2:] = 0
    more_padding = torch.cat([padded, torch.zeros(2, 2, dtype=torch.long)], dim=1)
    assert torch.allclose(model(more_padding, tgt), model(padded, tgt), atol=1e-5), (
        "extra source padding changed the output: forward must mask the source padding"
    )


### BEGIN HIDDEN TESTS
from course_reference.checks import isolate as _isolate
from course_reference.checks import nb06 as _checks

_test_Transformer = _isolate(globals(), _test_Transformer, **_checks.upstream(
    "PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder"))
### END HIDDEN TESTS
_test_Transformer()
print("Transformer: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_Transformer_hidden", "locked": true, "points": 3, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): reference weights copied in by name; encode, decode and
# forward compared with padded sources and targets, pad_id other than 0; dropout in train()
# mode only. Uses the reference layers, so a mistake in an earlier exercise is not charged twice.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb06 as _checks

_checks.check_Transformer(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 7. The paper's base model, and PyTorch's
#
# The base configuration of the paper is $D = 512$, $h = 8$, $N = 6$, $d_{ff} = 2048$,
# $P_{drop} = 0.1$. Counting its parameters (vocabularies of 37,000 tokens as in the
# paper's English-German setup), first untied, then with the paper's three-way tie (each
# shared matrix removes $V \cdot D = 37{,}000 \cdot 512 \approx 18.9$ M parameters):

# %%
def count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


base = Transformer(37000, 37000)  # d_model=512, num_heads=8, num_layers=6, d_ff=2048
parts = {"embeddings (src + tgt)": count(base.src_embed) + count(base.tgt_embed), "encoder": count(base.encoder),
         "decoder": count(base.decoder), "generator": count(base.generator)}
for name, n in parts.items():
    print(f"{name:>24}: {n / 1e6:6.2f} M")
print(f"{'total, untied':>24}: {count(base) / 1e6:6.2f} M")
tied = Transformer(37000, 37000, tie_embeddings=True)  # generator = target embedding
tied.src_embed.embedding.weight = tied.tgt_embed.embedding.weight  # and the source embedding: section 3.4
print(f"{'total, three-way tie':>24}: {count(tied) / 1e6:6.2f} M  (the paper's Table 3 reports 65 M for the base model)")
del tied

# %% [markdown]
# Untied, the three vocabulary-sized matrices (two embeddings and the generator's weight)
# hold 56.8 of the 101.0 M parameters. Tied as the paper ties them, one copy remains and
# the count is 63.1 M, close to the 65 M of the paper's Table 3. The paper gives its
# vocabulary as "about 37000 tokens" (section 5.1) and does not say how it counted, so the
# remaining 2 M cannot be placed exactly.
#
# `torch.nn.Transformer` implements the same encoder and decoder stacks (it takes
# already-embedded inputs, so it has no embeddings or generator). Its stacks add one final
# LayerNorm each (`encoder.norm`, `decoder.norm`, $2D$ parameters apiece); apart from
# those, the counts agree exactly:

# %%
torch_base = nn.Transformer(d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                            dim_feedforward=2048, batch_first=True)
final_norms = count(torch_base.encoder.norm) + count(torch_base.decoder.norm)
print(f"ours: encoder {count(base.encoder):,} + decoder {count(base.decoder):,}")
print(f"nn.Transformer: encoder {count(torch_base.encoder):,} + decoder {count(torch_base.decoder):,} "
      f"(final norms: {final_norms:,})")
assert count(base.encoder) + count(base.decoder) == count(torch_base) - final_norms
print("equal once the two final LayerNorms are set aside")
del base, torch_base

# %% [markdown]
# The same numbers are not enough: let us copy our weights into `nn.Transformer` and
# compare outputs. Its attention stores $W^Q, W^K, W^V$ stacked in one `in_proj_weight`,
# calls the feed-forward layers `linear1`/`linear2`, and its masks mean the opposite of ours
# (`True` = *blocked* for boolean masks), so we pass `~mask`. Dropping its final norms
# (`norm = None`) makes the two models the same function.

# %%
def copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
    theirs.out_proj.weight.copy_(ours.w_o.weight)
    theirs.out_proj.bias.copy_(ours.w_o.bias)


@torch.no_grad()
def copy_to_torch(ours: Transformer, theirs: nn.Transformer) -> None:
    theirs.encoder.norm = theirs.decoder.norm = None
    for mine, their in zip(ours.encoder.layers, theirs.encoder.layers, strict=True):
        copy_attention(mine.self_attn, their.self_attn)
        pairs = [(mine.feed_forward.w_1, their.linear1), (mine.feed_forward.w_2, their.linear2),
                 (mine.norm1, their.norm1), (mine.norm2, their.norm2)]
        for a, b in pairs:
            b.load_state_dict(a.state_dict())
    for mine, their in zip(ours.decoder.layers, theirs.decoder.layers, strict=True):
        copy_attention(mine.self_attn, their.self_attn)
        copy_attention(mine.cross_attn, their.multihead_attn)
        pairs = [(mine.feed_forward.w_1, their.linear1), (mine.feed_forward.w_2, their.linear2),
                 (mine.norm1, their.norm1), (mine.norm2, their.norm2), (mine.norm3, their.norm3)]
        for a, b in pairs:
            b.load_state_dict(a.state_dict())


# nn.Transformer's eval-mode fast path warns that nested tensors are a prototype; not our concern here.
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
small = Transformer(50, 60, d_model=32, num_heads=4, num_layers=2, d_ff=64).eval()
torch_small = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=64,
                             batch_first=True).eval()
copy_to_torch(small, torch_small)
src = torch.tensor([[4, 8, 15, 16, 23], [42, 7, 9, 0, 0]])  # pad_id = 0
tgt = torch.tensor([[1, 5, 6, 7], [1, 8, 0, 0]])
with torch.no_grad():
    src_x = small.positional_encoding(small.src_embed(src))
    tgt_x = small.positional_encoding(small.tgt_embed(tgt))
    theirs = torch_small(src_x, tgt_x, tgt_mask=~make_causal_mask(4)[0, 0],
                         src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt == 0,
                         memory_key_padding_mask=src == 0)
    ours = small.decode(tgt, small.encode(src, make_padding_mask(src, 0)), make_padding_mask(src, 0),
                        make_decoder_mask(tgt, 0))
print(f"max |ours - nn.Transformer| over every target position, padded ones included: "
      f"{(ours - theirs).abs().max():.2e}")

# %% [markdown]
# ## 8. Looking inside: shapes at every stage
#
# `print(model)` shows the module tree; forward hooks report the shape of the data as it
# flows through a small model (batch 2, source length 5, target length 4):

# %%
print(small)

# %%
shapes = []
hooks = [module.register_forward_hook(lambda m, args, out, name=name: shapes.append(
    (name, tuple(out[0].shape) if isinstance(out, tuple) else tuple(out.shape))))
    for name, module in small.named_modules()
    if name in {"src_embed", "tgt_embed", "encoder", "encoder.layers.0", "decoder.layers.0.self_attn",
                "decoder.layers.0.cross_attn", "decoder", "generator"}]
with torch.no_grad():
    small(src, tgt)
for hook in hooks:
    hook.remove()
for name, shape in shapes:
    print(f"{name:>28} -> {shape}")

# %% [markdown]
# ## 9. The decoder cannot see the future
#
# With the causal mask, the output at target position $t$ depends on target tokens
# $0..t$ only. Replace the tokens after position 3 with random ones and measure how much
# each position's logits move:

# %%
model = Transformer(50, 60, d_model=32, num_heads=4, num_layers=2, d_ff=64).eval()
src = torch.randint(1, 50, (1, 8))
tgt = torch.randint(1, 60, (1, 8))
changed = tgt.clone()
changed[0, 4:] = torch.randint(1, 60, (4,))
with torch.no_grad():
    moved = (model(src, changed) - model(src, tgt)).abs().amax(dim=-1)[0]  # (T,)
fig, ax = plt.subplots(figsize=(6, 2.8))
ax.bar(range(8), moved.numpy(), color=["C0"] * 4 + ["C1"] * 4)
ax.axvline(3.5, color="grey", linestyle="--")
ax.set(xlabel="target position t", ylabel="max |change in logits|",
       title="Tokens 4-7 replaced: only positions ≥ 4 move")
plt.tight_layout()
plt.show()
print("Notice: positions 0-3 did not move at all (change", f"{moved[:4].max():.1e});",
      "this is what lets training predict every position in parallel (notebook 07).")

# %% [markdown]
# ## In your own words
#
# Answer in a few sentences each, in the cell below each question; where a question asks for your own
# numbers, quote them from your run. These answers are graded by hand.

# %% [markdown]
# **Question 1** (2 points). Each sub-layer computes $\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$.
# What does the residual connection give a deep stack, and why is the normalisation there?

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_residual", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# The residual path carries $x$ past the sub-layer, so each sub-layer only has to learn a correction
# to its input, and the derivative of $x + \mathrm{Sublayer}(x)$ is the identity plus the sub-layer's
# own: the gradient has a term that skips the sub-layer, and a deep stack trains where a plain stack
# of the same depth would not. In this post-LN arrangement the skip is not clean, though: every
# LayerNorm sits on the residual path, so the gradient reaching the first layers has been rescaled
# by each normalisation on the way (Xiong et al., 2020, tie this to post-LN's need for a learning-rate
# warm-up). Pre-LN, $x + \mathrm{Sublayer}(\mathrm{LayerNorm}(x))$, keeps a pure identity path
# through the stack (notebook 08). The normalisation keeps each position's vector at
# mean 0 and variance 1 (then scaled by learned weights), so the sums do not grow layer after layer
# and the next layer's dot products stay in a range where the softmax is not saturated.

# %% [markdown]
# **Question 2** (2 points). In the decoder's cross-attention, which of the queries, keys and values
# come from the encoder? Why is this the only place where the decoder reads the source sentence?

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_cross_attention", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# The queries come from the decoder (the target positions); the keys and values come from the
# encoder's output (the memory). Each target position asks which source positions matter and takes a
# weighted sum of their encodings. The decoder's self-attention reads only target tokens and the
# feed-forward works on one position at a time, so the source enters only here. The weights decide
# *which* part of the source each target position reads. Weights spread evenly still read the
# source: they return the mean of the values, which are computed from every encoder output, a
# summary of the whole sentence (each
# encoded word already carries some context), so the decoder knows what the sentence is about but
# not which word it is translating now. Weights peaked on one source word align the target word
# with it.
