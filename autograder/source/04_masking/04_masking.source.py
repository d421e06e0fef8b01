# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · Masking: padding and causal
#
# Attention lets every position look at every other one. Two kinds of positions must be
# hidden:
#
# - **Padding.** Sentences in a batch have different lengths, so short ones are filled up
#   with a `<pad>` token. Pads carry no meaning; no query may attend to them.
# - **The future.** A decoder predicts word $t$ from words $0..t-1$ and is trained on all
#   positions at once (teacher forcing, notebook 07). If position $t$ could see position
#   $t+1$, it would simply copy the answer. The paper masks out these "illegal
#   connections" (Vaswani et al., 2017, section 3.2.3). The decoder's input is the target
#   shifted right by one (notebook 07 starts it with `<bos>`), so input position $t$ holds
#   word $t-1$: letting position $t$ attend to positions $0..t$ of that input is exactly
#   "words $0..t-1$".
#
# Masks are boolean tensors with **`True` = may attend**, shaped to broadcast against the
# attention scores `(B, h, Lq, Lk)`: a `1` in a mask's shape means "the same for every
# head / every query".
#
# **Exercises:** `make_padding_mask`, `make_causal_mask`, `make_decoder_mask`.

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
        "04_masking"
    )
    PROVIDED = ["course_blocks.py"]  # reference code of notebooks 01-03
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
import matplotlib.pyplot as plt
import seaborn as sns
import torch
from course_blocks import MultiHeadAttention

torch.manual_seed(0)
sns.set_theme(style="white", palette="colorblind")

PAD = 0
batch = torch.tensor([
    [5, 9, 4, 7, 2],      # a full sentence of 5 tokens
    [8, 3, 6, PAD, PAD],  # 3 tokens, then padding
])

# %% [markdown]
# ## 1. Padding masks
#
# Padding is a property of **keys**: whatever the query, a pad must receive weight 0. So
# the mask has one entry per key and broadcasts over heads and queries:
# `(B, L)` -> `(B, 1, 1, L)`.
#
# A mask of shape `(B, L)` or `(B, 1, L)` would broadcast against `(B, h, Lq, Lk)` along
# the wrong axes (right-aligned broadcasting matches `L` with `Lk` but `B` with `Lq` or
# `h`): silently wrong, or an error only when the sizes happen to differ.
#
# **Exercise 1.** Write `make_padding_mask(tokens, pad_id)`: int `(B, L)` -> bool
# `(B, 1, 1, L)`, `True` where the token is not `pad_id`, on the device of `tokens`.

# %% [markdown]
# **Stuck on `make_padding_mask`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.2.3 and §3.1 (attention must ignore padding).
#
# <details><summary>Hint 1: a nudge</summary>
#
# True means "may attend": which keys are real tokens?
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# Compare the tokens with `pad_id`, then add two axes so the mask broadcasts over heads and queries: `(B, L)` becomes `(B, 1, 1, L)`.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# A comparison such as `!=` between a tensor and a number gives a bool tensor of the same shape, `(B, L)`. New axes of size 1 come from `Tensor.unsqueeze` or from indexing with `None`; aim for `(B, 1, 1, L)`, with the new axes at positions 1 and 2.
#
# </details>
#
# **Check yourself:** Why is the mask `(B, 1, 1, L)` and not `(B, 1, L, 1)`?
#
# <details><summary>Answer</summary>
#
# Padding is a property of keys (the last axis of the scores): every query must ignore padded keys. `(B, 1, L, 1)` would blank whole query rows instead.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "make_padding_mask", "locked": false, "schema_version": 3, "solution": true}
def make_padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Mask out padded keys.

    Args:
        tokens: ``(B, L)`` integer token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, 1, L)``, True where ``tokens != pad_id`` (may be attended to).
    """
    ### BEGIN SOLUTION
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, L)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_make_padding_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false}
mask = make_padding_mask(batch, PAD)
assert mask.dtype == torch.bool, f"masks are bool, got {mask.dtype}"
assert mask.shape == (2, 1, 1, 5), f"expected (B, 1, 1, L) = (2, 1, 1, 5), got {tuple(mask.shape)}"
assert mask[1, 0, 0].tolist() == [True, True, True, False, False], (
    f"sentence 2 has 3 real tokens then 2 pads; got {mask[1, 0, 0].tolist()} (True = real token)"
)
assert make_padding_mask(torch.tensor([[1, 2, 1]]), pad_id=1)[0, 0, 0].tolist() == [False, True, False], (
    "use the pad_id argument, not a fixed 0"
)
print("make_padding_mask: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_make_padding_mask_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): random batches, other pad ids, batch and length 1, the
# device of the result; and the property above (padding changes no real position) on other
# batches and pad ids.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb04 as _checks

_checks.check_make_padding_mask(globals())
_checks.check_padding_has_no_effect(globals())
### END HIDDEN TESTS

# %% [markdown]
# **Padding changes nothing at real positions.** With the mask, a padded sentence gives
# exactly the outputs it gives alone, whatever the pads contain. The test below runs a
# padded batch and each sentence on its own through the same attention layer.

# %% nbgrader={"grade": true, "grade_id": "test_make_padding_mask_no_effect", "locked": true, "points": 1, "schema_version": 3, "solution": false}
layer = MultiHeadAttention(16, 4).eval()
embed = torch.nn.Embedding(10, 16)
mask = make_padding_mask(batch, PAD)
assert isinstance(mask, torch.Tensor) and mask.dtype == torch.bool and mask.shape == (2, 1, 1, 5), (
    f"the attention layer needs a bool mask of shape (B, 1, 1, L) = (2, 1, 1, 5), got "
    f"{getattr(mask, 'dtype', type(mask).__name__)} {tuple(getattr(mask, 'shape', ()))}"
)
with torch.no_grad():
    padded, _ = layer(embed(batch), embed(batch), embed(batch), mask=mask)
    for row, length in enumerate([5, 3]):
        alone = embed(batch[row : row + 1, :length])
        expected, _ = layer(alone, alone, alone)
        if not torch.allclose(padded[row, :length], expected[0], atol=1e-6):
            pads = (batch[row] == PAD).nonzero().flatten().tolist()
            mine = mask[row, 0, 0].int().tolist()
            facts = (f"sentence {row + 1} is {batch[row].tolist()} "
                     + (f"(padding at positions {pads})" if pads else "(no padding)")
                     + f" and your mask for it is {mine} (1 = may attend)")
            if mask[:, 0, 0].equal(batch == PAD):
                why = "the mask is inverted: True must mark the real tokens, tokens != pad_id"
            elif not pads:
                why = "a sentence without padding must have every key allowed"
            else:
                why = "the mask must be True exactly at the real tokens and False at the pads"
            raise AssertionError(f"{facts}; run in the batch, its real positions differ from the sentence "
                                 f"run alone: {why}")
print("make_padding_mask: padding does not change the real positions")

# %% [markdown]
# ## 2. Causal masks
#
# Position $t$ may attend to positions $0, 1, \dots, t$: itself and the past. As a matrix
# (rows = queries, columns = keys) that is the **lower triangle including the diagonal**,
# `torch.tril`. Some tutorials build the opposite, a "subsequent mask" with `True` on the
# future (`triu(1)`), and then compare with `== 0`; with our convention, `tril` says what
# it means.
#
# **Exercise 2.** Write `make_causal_mask(size, device=None)` -> bool `(1, 1, size, size)`
# on `device`. Create it there (pass `device=` to the constructor) instead of building it
# on the CPU and copying it over.

# %% [markdown]
# **Stuck on `make_causal_mask`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.2.3 ("prevent leftward information flow") and §3.1.
#
# <details><summary>Hint 1: a nudge</summary>
#
# Position `t` may look at positions `0..t`. Draw the `size x size` grid: which half is allowed?
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# The lower triangle including the diagonal is allowed (True); everything above is the future. Add two leading axes for batch and heads.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# Look up `torch.ones` (it takes `dtype=` and `device=`) for a `(size, size)` grid of True, and `torch.tril` (or `Tensor.tril`), which keeps the lower triangle with its diagonal. Then two leading axes of size 1 (indexing with `None`, or `view`) make `(1, 1, size, size)`.
#
# </details>
#
# **Check yourself:** Row 0 of the causal mask has how many True entries, and why is that not a problem?
#
# <details><summary>Answer</summary>
#
# One (the diagonal): the first position attends to itself only, so no row is fully blocked.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "make_causal_mask", "locked": false, "schema_version": 3, "solution": true}
def make_causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Let each position attend to itself and earlier positions only.

    Args:
        size: sequence length ``T``.
        device: where to create the mask (default: PyTorch's default device).

    Returns:
        bool ``(1, 1, T, T)``; ``[0, 0, i, j]`` is True iff ``j <= i``.
    """
    ### BEGIN SOLUTION
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]  # (1, 1, T, T)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_make_causal_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false}
causal = make_causal_mask(4)
assert causal.dtype == torch.bool and causal.shape == (1, 1, 4, 4), (
    f"expected bool (1, 1, 4, 4), got {causal.dtype} {tuple(causal.shape)}"
)
assert causal[0, 0].int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], (
    f"expected the lower triangle incl. the diagonal, got {causal[0, 0].int().tolist()}"
)
print("make_causal_mask: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_make_causal_mask_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): sizes 1 to 9 and the `device` argument.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb04 as _checks

_checks.check_make_causal_mask(globals())
### END HIDDEN TESTS

# %% [markdown]
# **The causal mask leaks nothing.** If output $t$ does not depend on inputs after $t$, the
# gradient of output $t$ with respect to every later input is exactly zero. The test
# checks that for every $t$ with autograd, and that earlier inputs *do* matter.

# %% nbgrader={"grade": true, "grade_id": "test_make_causal_mask_no_leak", "locked": true, "points": 1, "schema_version": 3, "solution": false}
layer = MultiHeadAttention(16, 4).eval()
x = torch.randn(1, 6, 16, requires_grad=True)
out, _ = layer(x, x, x, mask=make_causal_mask(6))
for t in range(6):
    (grad,) = torch.autograd.grad(out[0, t].sum(), x, retain_graph=True)
    leak = grad[0, t + 1 :].abs().max().item() if t < 5 else 0.0
    assert leak == 0.0, f"output {t} depends on later inputs (gradient up to {leak:.2e}): the future leaks"
    assert grad[0, : t + 1].abs().sum() > 0, f"output {t} should depend on inputs 0..{t}"
print("make_causal_mask: no gradient flows from the future")

# %% [markdown]
# ## 3. The decoder mask
#
# A decoder's self-attention needs both rules at once: a key must be a real token **and**
# not in the future. Combine the two with `&`; broadcasting turns `(B, 1, 1, T)` and
# `(1, 1, T, T)` into `(B, 1, T, T)`, one `T x T` matrix per sentence.
#
# **Exercise 3.** Write `make_decoder_mask(tokens, pad_id)` -> bool `(B, 1, T, T)` on the
# device of `tokens`; your two functions do most of the work. `tokens` is `(B, T)`: the
# length is its axis 1.

# %% [markdown]
# **Stuck on `make_decoder_mask`?** Open one hint at a time. Paper: [Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762), §3.2.3 and §3.1 (decoder self-attention).
#
# <details><summary>Hint 1: a nudge</summary>
#
# A decoder position must respect both rules at once.
#
# </details>
# <details><summary>Hint 2: the idea</summary>
#
# A key is allowed only when it is not padding AND not in the future: combine the two masks with logical and; broadcasting gives `(B, 1, T, T)`.
#
# </details>
# <details><summary>Hint 3: the pieces</summary>
#
# The shapes to combine: `(B, 1, 1, T)` from the padding mask and `(1, 1, T, T)` from the causal one; `&` broadcasts them to `(B, 1, T, T)`. `T` is the size of axis 1 of `tokens` (axis 0 is the batch size `B`), and the causal mask belongs on the device of `tokens`.
#
# </details>
#
# **Check yourself:** Why `&` and not `|`?
#
# <details><summary>Answer</summary>
#
# With `|`, a key that is allowed by one rule but forbidden by the other would be allowed; a position must pass both tests.
#
# </details>

# %% nbgrader={"grade": false, "grade_id": "make_decoder_mask", "locked": false, "schema_version": 3, "solution": true}
def make_decoder_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Padding AND causal mask for decoder self-attention.

    Args:
        tokens: ``(B, T)`` integer target token ids.
        pad_id: the id of the padding token.

    Returns:
        bool ``(B, 1, T, T)`` on the device of ``tokens``: True where key ``j`` is a real
        token and ``j <= i`` (query ``i``).
    """
    ### BEGIN SOLUTION
    return make_padding_mask(tokens, pad_id) & make_causal_mask(tokens.size(1), device=tokens.device)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_make_decoder_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def _test_make_decoder_mask():
    try:
        dec = make_decoder_mask(batch, PAD)
    except RuntimeError as err:
        raise AssertionError(
            f"make_decoder_mask(tokens of shape (B, T) = {tuple(batch.shape)}) raised: {err}. If a size "
            f"{batch.size(0)} (= B) meets a size {batch.size(1)} (= T), one mask was built with the batch size "
            "as its length: T is tokens.size(1)."
        ) from None
    assert dec.dtype == torch.bool and dec.shape == (2, 1, 5, 5), (
        f"expected bool (B, 1, T, T) = (2, 1, 5, 5), got {dec.dtype} {tuple(dec.shape)}"
    )
    assert dec[1, 0, 4].tolist() == [True, True, True, False, False], (
        "the last query of sentence 2 may see its 3 real tokens, not the pads"
    )
    assert dec[0, 0, 1].tolist() == [True, True, False, False, False], "query 1 may see keys 0 and 1 only"


### BEGIN HIDDEN TESTS
from course_reference.checks import isolate as _isolate
from course_reference.checks import nb04 as _checks

_test_make_decoder_mask = _isolate(
    globals(), _test_make_decoder_mask, **_checks.upstream("make_padding_mask", "make_causal_mask")
)
### END HIDDEN TESTS
_test_make_decoder_mask()
print("make_decoder_mask: visible tests passed")

# %% nbgrader={"grade": true, "grade_id": "test_make_decoder_mask_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
# Hidden tests (run by the grader): random padded batches, other pad ids, the device.
### BEGIN HIDDEN TESTS
from course_reference.checks import nb04 as _checks

_checks.check_make_decoder_mask(globals())
### END HIDDEN TESTS

# %% [markdown]
# ## 4. The three masks, side by side
#
# For the second sentence of the batch (3 tokens, 2 pads): what each query may see.
# Dark = may attend. *Predict, then run:* in the decoder mask, which query sees exactly
# one key, and is any row blocked entirely?

# %%
tokens = ["ich", "bin", "hier", "<pad>", "<pad>"]
masks = {
    "padding (B, 1, 1, L), broadcast": make_padding_mask(batch, PAD)[1, 0].expand(5, 5),
    "causal (1, 1, T, T)": make_causal_mask(5)[0, 0],
    "decoder = padding & causal": make_decoder_mask(batch, PAD)[1, 0],
}
fig, axes = plt.subplots(1, 3, figsize=(13, 4), layout="constrained")
for ax, (title, m) in zip(axes, masks.items(), strict=True):
    sns.heatmap(m.int(), ax=ax, cmap="Greys", vmin=0, vmax=1, cbar=False, annot=True, fmt="d",
                xticklabels=tokens, yticklabels=tokens, square=True, linewidths=0.5, linecolor="lightgrey")
    ax.set(title=title, xlabel="key", ylabel="query")
plt.show()
print("Notice: the decoder mask is the cell-wise AND of the other two; the pad rows see only real "
      "tokens, so no row is fully blocked here.")

# %% [markdown]
# ## In your own words
#
# Answer in a few sentences each, in the cell below each question; where a question asks for your own
# numbers, quote them from your run. These answers are graded by hand.

# %% [markdown]
# **Question 1** (2 points). A sentence of 3 tokens is padded to 5 in a batch. Without a padding mask,
# what changes in the encoder's output for its 3 real tokens, and why would the same sentence then be
# translated differently in another batch?

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_padding_mask", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# The pad positions have keys like any other token, so every real token gives them some attention
# weight and mixes the pad's value vector into its output. How much depends on how many pads there
# are, which depends on the longest sentence in the batch: in another batch the same sentence gets a
# different amount of padding, different encodings and possibly a different translation. With the mask
# the real tokens' outputs are the same whatever the padding.

# %% [markdown]
# **Question 2** (2 points). Training computes every target position in one pass. What would the
# decoder learn if the causal mask were left out during training, and what would happen when it
# translates?

# %% [markdown] nbgrader={"grade": true, "grade_id": "question_causal_mask", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# The decoder input is the target shifted right, so without the mask position $t$ can see token $t+1$:
# the very label it must predict. It learns to copy it, the training loss falls close to 0, and it
# learns little about translating. When it translates, tokens are generated one at a time and the
# future ones do not exist yet, so the shortcut it relied on is gone and its output is poor: training
# and use no longer match.
