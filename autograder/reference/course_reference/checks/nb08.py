"""Hidden checks for notebook 08 (a modern decoder-only language model)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from .. import nb08_modern_decoder as ref
from . import (
    as_tensor,
    assert_matches,
    construct,
    copy_parameters,
    generator,
    guarded,
    is_instance,
    on_another_device,
    randn,
    randomise,
    record,
    reference_for,
    student_name,
    tolerance,
    type_name,
    upstream_from,
    within,
)

# These checks run in the grader's process, the student's code in the kernel (transformer_course.grading.judging.judge).
JUDGED = True

# Public implementations compute in float32 whatever the input (Meta's LLaMA upcasts with .float(), rotary
# tables are float32), so the modules are compared in float32, with its tolerance.
F32 = tolerance(torch.float32)
SECTION_RMS = "see section 1, 'RMSNorm'"
SECTION_ROPE = "see section 2, 'Rotary position embeddings'"
SECTION_SWIGLU = "see section 3, 'SwiGLU'"
SECTION_GQA = "see section 4, 'Grouped-query attention'"
SECTION_LAYER = "see section 5, 'The attention layer'"
SECTION_TILES = "see section 6, 'Attention tile by tile'"
SECTION_BLOCK = "see section 7, 'The pre-LN decoder block'"
SECTION_LM = "see section 8, 'The language model, with tied embeddings'"
SECTION_SAMPLE = "see section 9, 'Sampling: temperature and top-p'"
SECTION_GENERATE = "see section 10, 'Generation with a key/value cache'"
upstream = upstream_from(ref)


def _pair(ns: dict[str, Any], name: str, *args: Any, gen: torch.Generator, deps: tuple[str, ...] = (),
          dtype: torch.dtype = torch.float32) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The student's module and a randomised reference with the same weights."""
    cls = student_name(ns, name)
    with reference_for(ns, **upstream(*deps)):
        mine = construct(cls, name, *args)
    reference = randomise(getattr(ref, name)(*args), gen, scale=0.4)  # RMSNorm gains near 1
    copy_parameters(mine, reference, f"{name}{args}")
    return mine.to(dtype), reference.to(dtype)


def _call(ns: dict[str, Any], fn: Any, name: str, *args: Any, deps: tuple[str, ...] = (), grad: bool = False) -> Any:
    with reference_for(ns, **upstream(*deps)), torch.set_grad_enabled(grad):
        return guarded(fn, name)(*args)


def _expect_error(call: Any, what: str, error: type[Exception], why: str) -> None:
    try:
        call()
    except error:
        return
    except NotImplementedError:
        raise
    except Exception as exc:
        raise AssertionError(f"{what} raised {type(exc).__name__}; raise {error.__name__}: {why}.") from None
    raise AssertionError(f"{what} should raise {error.__name__}: {why}.")


def _gradients(got: torch.Tensor, expected: torch.Tensor, module: torch.nn.Module, reference: torch.nn.Module,
               what: str, seed: int) -> None:
    """Backpropagate the same random weighting of both outputs and compare the parameters' gradients
    (read after the backward pass: a judged kernel's parameters come here as copies)."""
    weights = randn(*expected.shape, gen=generator(seed), dtype=expected.dtype)
    (got * weights).sum().backward()
    (expected * weights).sum().backward()
    mine = dict(module.named_parameters())
    for name, tensor in reference.named_parameters():
        grad = mine[name].grad
        if grad is None:
            raise AssertionError(f"{what}: no gradient reaches `{name}` (is it used in forward?).")
        assert_matches(grad, tensor.grad, f"{what}: the gradient of `{name}`")


# ------------------------------------------------------------------------------------ RMSNorm
def _rms_mistakes(x: torch.Tensor, weight: torch.Tensor, eps: float) -> dict[str, torch.Tensor]:
    ms = x.pow(2).mean(-1, keepdim=True)
    centred = x - x.mean(-1, keepdim=True)
    var = centred.pow(2).mean(-1, keepdim=True)
    return {
        f"the mean is subtracted first: that is LayerNorm. RMSNorm divides x itself by its root mean square, "
        f"without centring ({SECTION_RMS}).": centred / torch.sqrt(var + eps) * weight,
        f"x is divided by its standard deviation without being centred; divide by the root mean square, "
        f"sqrt(mean(x^2) + eps) ({SECTION_RMS}).": x / torch.sqrt(var + eps) * weight,
        f"eps is added outside the square root; it goes inside: sqrt(mean(x^2) + eps) ({SECTION_RMS}).":
            x / (torch.sqrt(ms) + eps) * weight,
        f"x is divided by the mean square, without the square root ({SECTION_RMS}).": x / (ms + eps) * weight,
        f"x is multiplied by its root mean square; divide by it (multiply by rsqrt) ({SECTION_RMS}).":
            x * torch.sqrt(ms + eps) * weight,
        f"the gain `weight` is not applied ({SECTION_RMS}).": x * torch.rsqrt(ms + eps),
        f"x is divided by the norm sqrt(sum(x^2)); RMSNorm uses the MEAN of the squares ({SECTION_RMS}).":
            x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps) * weight,
        f"the mean square is taken over every entry of x, not over the last axis of each vector ({SECTION_RMS}).":
            x * torch.rsqrt(x.pow(2).mean() + eps) * weight,
        f"the mean square is taken over the first axis; normalise each vector over its last axis ({SECTION_RMS}).":
            x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + eps) * weight,
        f"eps is ignored: use the module's `self.eps` inside the square root ({SECTION_RMS}).":
            x * torch.rsqrt(ms + 1e-6) * weight if eps != 1e-6 else None,
        f"x is divided by the mean of |x|; RMSNorm divides by the root of the mean of the SQUARES, "
        f"sqrt(mean(x^2) + eps) ({SECTION_RMS}).": x / (x.abs().mean(-1, keepdim=True) + eps) * weight,
        f"the root mean square is taken over axis -2 (across the tokens); each vector is normalised over its own "
        f"features, the last axis ({SECTION_RMS}).": (x * torch.rsqrt(x.pow(2).mean(-2, keepdim=True) + eps) * weight
                                                      if x.dim() > 2 else None),
        f"the root mean square is taken over axis -2 (F.normalize(x, dim=-2) * sqrt(d)); normalise each vector over "
        f"its own features, the last axis ({SECTION_RMS}).": (F.normalize(x, dim=-2) * x.size(-1) ** 0.5 * weight
                                                              if x.dim() > 2 else None),
        f"x / ||x|| is multiplied by 1/sqrt(d); the norm ||x|| is sqrt(d) times the root mean square, so "
        f"multiply by sqrt(d) ({SECTION_RMS}).": F.normalize(x, dim=-1) * x.size(-1) ** -0.5 * weight,
        f"the gain is applied as (1 + weight), Gemma's convention for a weight stored as an offset from 1; here "
        f"`weight` is the gain itself, initialised to ones: multiply by weight ({SECTION_RMS}).":
            x * torch.rsqrt(ms + eps) * (1 + weight),
        f"x is divided by the square root of the mean of |x|; square the entries (x^2), not their absolute values "
        f"({SECTION_RMS}).": x * torch.rsqrt(x.abs().mean(-1, keepdim=True) + eps) * weight,
    }


def check_RMSNorm(ns: dict[str, Any]) -> None:  # noqa: N802 (the class's name)
    cls = student_name(ns, "RMSNorm")
    gen = generator(801)
    for shape, eps, dtype, offset in [((2, 5, 8), 1e-6, torch.float32, 1.5), ((3, 4), 0.5, torch.float64, 0.0),
                                      ((1, 1, 6), 1e-6, torch.float64, -2.0), ((4, 16), 1e-3, torch.float32, 0.3)]:
        d = shape[-1]
        mine = construct(cls, "RMSNorm", d, eps)
        weight = dict(mine.named_parameters()).get("weight")
        if weight is None or tuple(weight.shape) != (d,):
            raise AssertionError(f"RMSNorm({d}) needs a parameter `weight` of shape ({d},) ({SECTION_RMS}).")
        gain = 1.0 + 0.5 * randn(d, gen=gen)
        with torch.no_grad():
            mine.weight.copy_(gain)
        mine.to(dtype)
        scale = 0.2 if eps == 0.5 else 1.0  # small entries: eps inside or outside the root differ visibly
        x = (randn(*shape, gen=gen, dtype=dtype) + offset) * scale
        x.requires_grad_(True)
        reference = ref.RMSNorm(d, eps).to(dtype)
        with torch.no_grad():
            reference.weight.copy_(gain.to(dtype))
        expected = reference(x)
        what = f"RMSNorm({d}, eps={eps}) on x {shape} {str(dtype).replace('torch.', '')}"
        got = guarded(mine, "RMSNorm.forward")(x)
        assert_matches(got, expected, what, _rms_mistakes(x.detach(), gain.to(dtype), eps), tol=F32,
                       hint=f"Expected x / sqrt(mean(x^2 over the last axis) + eps) * weight ({SECTION_RMS}).")
        (got * expected.detach()).sum().backward()
        x_grad, x.grad = x.grad, None
        (expected * expected.detach()).sum().backward()
        assert_matches(x_grad, x.grad, f"{what}: the gradient with respect to x", tol=F32)
    builtin = torch.nn.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        builtin.weight.copy_(gain)
    mine = construct(cls, "RMSNorm", 16)
    with torch.no_grad():
        mine.weight.copy_(gain)
    x = randn(3, 16, gen=gen) * 4
    assert_matches(guarded(mine, "RMSNorm.forward")(x), builtin(x).detach(),
                   "RMSNorm(16) against torch.nn.RMSNorm(16, eps=1e-6)")


# ------------------------------------------------------------------------------ rotary embeddings
def _rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0, *, halves: bool = False,
          sign: float = 1.0, exponent: str = "2i", diagonal: bool = False) -> torch.Tensor:
    """Rotary embeddings right and wrong: ``halves`` pairs (i, i + d/2) (the GPT-NeoX layout);
    ``diagonal`` multiplies positions and frequencies elementwise (only when ``L == d/2``)."""
    d = x.size(-1)
    i = torch.arange(d // 2, dtype=torch.float64)
    power = {"2i": 2 * i / d, "i": i / d}[exponent]
    p = positions.to(torch.float64)
    return _rotate(x, (p if diagonal else p[:, None]) * base ** (-power) * sign, halves=halves)


def _rotate(x: torch.Tensor, angles: torch.Tensor, *, halves: bool = False) -> torch.Tensor:
    """``x`` rotated pair by pair by ``angles`` (their cosines and sines cast to ``x``'s dtype)."""
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    if halves:
        first, second = x[..., : x.size(-1) // 2], x[..., x.size(-1) // 2:]
        return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def _rope_mistakes(x: torch.Tensor, positions: torch.Tensor, base: float) -> dict[str, torch.Tensor]:
    mistakes = {
        f"features are paired as (i, i + d/2) (the 'rotate_half' layout of GPT-NeoX and Hugging Face's LLaMA); "
        f"this notebook rotates neighbouring pairs (2i, 2i+1), as in eq. 34 ({SECTION_ROPE}).":
            _rope(x, positions, base, halves=True),
        f"the rotation goes the wrong way: the even output is even*cos - odd*sin, the odd one even*sin + odd*cos "
        f"({SECTION_ROPE}).": _rope(x, positions, base, sign=-1.0),
        f"the frequency of pair i is base^(-i/d); it is base^(-2i/d) ({SECTION_ROPE}).":
            _rope(x, positions, base, exponent="i"),
        f"the positions are shifted by one: rotate by the positions given, p * theta_i ({SECTION_ROPE}).":
            _rope(x, positions + 1, base),
        f"the positions given are ignored (tokens rotated as 0, 1, 2, ...): use `positions` ({SECTION_ROPE}).":
            _rope(x, torch.arange(x.size(-2)), base),
        f"the rotated pairs are written back as two halves (all even outputs, then all odd ones); each pair "
        f"(2i, 2i+1) goes back to its own place ({SECTION_ROPE}).":
            torch.cat([_rope(x, positions, base)[..., 0::2], _rope(x, positions, base)[..., 1::2]], dim=-1),
    }
    if positions.numel() == x.size(-1) // 2:  # otherwise the elementwise product does not broadcast
        mistakes[f"position i is multiplied by frequency i only (an elementwise product, or an einsum that takes "
                 f"the diagonal); every position needs every frequency: angles of shape (L, d/2) ({SECTION_ROPE})."
                 ] = _rope(x, positions, base, diagonal=True)
    if base != 10000.0:
        mistakes[f"the `base` argument is ignored (10000 is used) ({SECTION_ROPE})."] = _rope(x, positions)
    for other in (500000.0, 1e6, 1e5, 1e3):  # the bases of later models (LLaMA 3: 500000), hard-coded
        if other != base:
            mistakes[f"the angles use base {other:g}, not the `base` argument ({base:g} here): theta_i = "
                     f"base^(-2i/d) ({SECTION_ROPE})."] = _rope(x, positions, other)
    return mistakes


# Angles computed in float32 (as Meta's, llama2.c's and torchtune's tables are) differ from float64 ones by
# about 1e-5 at position 100: a correct style, not a mistake.
ROPE_TOL = {"rtol": 1e-4, "atol": 1e-4}
# In bfloat16 (8 significant bits) the products and sums themselves round by about 0.4% each, in whatever
# order they are done; an angle computed in bfloat16 at position 1000 is off by radians.
ROPE_HALF_TOL = {"rtol": 3e-2, "atol": 3e-2}


def _rope_half_precision(x: torch.Tensor, positions: torch.Tensor, base: float) -> dict[str, torch.Tensor]:
    """Rotary embeddings whose angles (or frequencies) are computed in ``x``'s half-precision dtype:
    GPT-NeoX's table kept as a converted buffer (gpt-neox#1003), frequencies rounded first (sglang-jax#1472)."""
    d = x.size(-1)
    inv_freq = (base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)).to(x.dtype)
    in_dtype = positions.to(x.dtype)[:, None] * inv_freq
    rounded = positions.double()[:, None] * inv_freq.double()
    out = {label: _rotate(x, angles)
           for label, angles in (("the angles are computed", in_dtype), ("the frequencies are rounded", rounded))}
    return {f"{label} in {str(x.dtype).replace('torch.', '')}, x's own dtype: with 8 significant bits the angle "
            f"at position {int(positions.max())} is off by whole radians. Compute the frequencies and angles in "
            f"float32 or float64 and cast only cos and sin ({SECTION_ROPE}).": value for label, value in out.items()}


def check_apply_rotary_embedding(ns: dict[str, Any]) -> None:
    fn = student_name(ns, "apply_rotary_embedding")
    gen = generator(802)
    # First, L == d/2: an elementwise product of positions and frequencies runs there and is named.
    cases = [((2, 2, 4, 8), torch.arange(4), 10000.0, torch.float32),
             ((2, 3, 5, 8), torch.arange(5), 10000.0, torch.float32),
             ((4, 6), torch.tensor([3, 7, 8, 20]), 10000.0, torch.float64),
             ((1, 2, 3, 16), torch.tensor([100, 101, 102]), 500.0, torch.float32),
             ((2, 1, 7, 4), torch.arange(10, 17), 10000.0, torch.float64)]
    for shape, positions, base, dtype in cases:
        x = randn(*shape, gen=gen, dtype=dtype)
        what = f"apply_rotary_embedding(x {shape}, positions {positions.tolist()}, base={base})"
        got = fn(x, positions, base) if base != 10000.0 else fn(x, positions)
        expected = ref.apply_rotary_embedding(x, positions, base)
        # The rotation-matrix form of eq. 34, pair by pair, as a second reference.
        angles = ref.rotary_angles(positions, shape[-1], base)
        c, s = angles.cos(), angles.sin()
        rotation = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (L, d/2, 2, 2)
        pairs = x.double().unflatten(-1, (-1, 2))[..., None]  # (..., L, d/2, 2, 1)
        by_matrix = (rotation @ pairs).squeeze(-1).flatten(-2).to(dtype)
        assert within(by_matrix, expected, tolerance(dtype)).all(), "reference and rotation matrices disagree"
        assert_matches(got, expected, what, _rope_mistakes(x, positions, base), tol=ROPE_TOL,
                       hint=f"Expected pair (x[2i], x[2i+1]) rotated by the angle p * base^(-2i/d) ({SECTION_ROPE}).")
    # Half precision at long positions, where a model in bfloat16 meets them.
    x, positions = randn(2, 2, 4, 16, gen=gen, dtype=torch.bfloat16), torch.arange(1000, 1004)
    what = f"apply_rotary_embedding(x (2, 2, 4, 16) bfloat16, positions {positions.tolist()})"
    assert_matches(fn(x, positions), ref.apply_rotary_embedding(x, positions), what,
                   {**_rope_half_precision(x, positions, 10000.0), **_rope_mistakes(x, positions, 10000.0)},
                   tol=ROPE_HALF_TOL, hint=f"Expected the rotation by p * base^(-2i/d), the angles computed in "
                                           f"float32 or float64, the result in x's dtype ({SECTION_ROPE}).")
    # The relative-position property: <R(m) q, R(n) k> depends on m - n only.
    q, k = randn(1, 32, gen=gen), randn(1, 32, gen=gen)
    scores = [(as_tensor(fn(q, torch.tensor([m])), "apply_rotary_embedding(q)")
               @ as_tensor(fn(k, torch.tensor([n])), "apply_rotary_embedding(k)").T).item()
              for m, n in [(3, 0), (13, 10), (503, 500)]]
    if max(scores) - min(scores) > 1e-4 * max(1.0, abs(scores[0])):
        raise AssertionError(f"the score <R(m) q, R(n) k> should depend on m - n only, but differs between "
                             f"(m, n) = (3, 0), (13, 10) and (503, 500) ({SECTION_ROPE}).")
    _expect_error(lambda: ns["apply_rotary_embedding"](torch.zeros(2, 3, 5), torch.arange(3)),
                  "apply_rotary_embedding(x with 5 features, ...)", ValueError,
                  "the features are rotated in pairs, so their number must be even")
    on_another_device(lambda: ns["apply_rotary_embedding"](torch.empty(2, 3, 6, 8, device="meta"),
                                                           torch.arange(6, device="meta")),
                      "apply_rotary_embedding(x on a GPU, positions on a GPU)",
                      f"the table of frequencies or angles (`torch.arange(0, d, 2)`) ({SECTION_ROPE})")


# ---------------------------------------------------------------------------------------- SwiGLU
def check_SwiGLU(ns: dict[str, Any]) -> None:  # noqa: N802 (the class's name)
    gen = generator(803)
    for shape, d, d_ff in [((2, 4, 8), 8, 12), ((3, 6), 6, 16), ((1, 1, 4), 4, 4)]:
        mine, reference = _pair(ns, "SwiGLU", d, d_ff, gen=gen)
        x = randn(*shape, gen=gen)
        what = f"SwiGLU({d}, {d_ff}) on x {shape}"
        got = _call(ns, mine, "SwiGLU.forward", x, grad=True)
        expected = reference(x)
        w1, w2, w3 = (getattr(reference, n) for n in ("w1", "w2", "w3"))
        with torch.no_grad():
            mistakes = {
                f"SiLU is applied to w3(x); the gate is w1: w2(SiLU(w1 x) * w3 x) ({SECTION_SWIGLU}).":
                    w2(w1(x) * F.silu(w3(x))),
                f"ReLU is used instead of SiLU (x * sigmoid(x)) on the gate ({SECTION_SWIGLU}).":
                    w2(torch.relu(w1(x)) * w3(x)),
                f"GELU is used instead of SiLU (x * sigmoid(x)) on the gate ({SECTION_SWIGLU}).":
                    w2(F.gelu(w1(x)) * w3(x)),
                f"the gate is sigmoid(w1 x) (the original GLU); SwiGLU uses SiLU(w1 x) = w1 x * sigmoid(w1 x) "
                f"({SECTION_SWIGLU}).": w2(torch.sigmoid(w1(x)) * w3(x)),
                f"there is no gate: w3(x) is never multiplied in ({SECTION_SWIGLU}).": w2(F.silu(w1(x))),
                f"SiLU is applied after the product; it applies to w1(x) only ({SECTION_SWIGLU}).":
                    w2(F.silu(w1(x) * w3(x))),
                f"the two branches are added, not multiplied ({SECTION_SWIGLU}).": w2(F.silu(w1(x)) + w3(x)),
            }
        assert_matches(got, expected, what, mistakes,
                       hint=f"Expected w2(SiLU(w1(x)) * w3(x)) ({SECTION_SWIGLU}).")
        _gradients(got, expected, mine, reference, what, 8030)


# ------------------------------------------------------------------------------------- repeat_kv
def check_repeat_kv(ns: dict[str, Any]) -> None:
    fn = student_name(ns, "repeat_kv")
    gen = generator(804)
    for shape, n_rep in [((2, 3, 4, 5), 2), ((1, 2, 3, 4), 4), ((2, 1, 5, 3), 3), ((1, 4, 2, 2), 1)]:
        x = randn(*shape, gen=gen)
        b, h, length, d = shape
        assert_matches(fn(x, n_rep), ref.repeat_kv(x, n_rep), f"repeat_kv(x {shape}, n_rep={n_rep})", {
            f"the list of heads is repeated as a whole ([a, b, a, b], x.repeat): query head j would read key/value "
            f"head j % h_kv; each group of consecutive query heads shares one head, so repeat each head next to "
            f"itself ([a, a, b, b]) ({SECTION_GQA}).": x.repeat(1, n_rep, 1, 1) if h > 1 and n_rep > 1 else None,
            f"the repeats are along the length axis; repeat the heads (axis 1) ({SECTION_GQA}).":
                x.repeat_interleave(n_rep, dim=2).reshape(b, h * n_rep, length, d) if n_rep > 1 else None,
            f"head j of the output is x[:, j // h_kv] (divided by the number of key/value heads); it is x[:, j // n_rep], "
            f"each key/value head serving n_rep query heads in a row ({SECTION_GQA}).":
                x.index_select(1, torch.arange(h * n_rep) // h) if h > n_rep > 1 else None,
        }, hint=f"Expected head j of the output to be x[:, j // n_rep] ({SECTION_GQA}).")


# ----------------------------------------------------------------------------- the attention layer
def _gqa(layer: ref.GroupedQueryAttention, x: torch.Tensor, past: ref.PastKV | None = None, *,
         rope_values: bool = False, rope: bool = True, restart: bool = False, rerotate: bool = False,
         causal: str = "offset", tiled: bool = False, scale: float | None = None, unrotated_cache: bool = False,
         halves: bool = False, no_transpose: bool = False) -> tuple[torch.Tensor, ref.PastKV]:
    """The layer's forward pass, right (by default) and with one known mistake."""
    b, length, d = x.shape
    start = 0 if past is None else past[0].size(2)
    q = layer.w_q(x).view(b, length, layer.num_heads, layer.d_head).transpose(1, 2)
    k = layer.w_k(x).view(b, length, layer.num_kv_heads, layer.d_head).transpose(1, 2)
    v = layer.w_v(x).view(b, length, layer.num_kv_heads, layer.d_head).transpose(1, 2)
    first = 0 if restart else start
    positions = torch.arange(first, first + length)
    if halves:
        q, k = _rope(q, positions, halves=True), _rope(k, positions, halves=True)
    elif rope:
        q = ref.apply_rotary_embedding(q, positions)
        if not rerotate and not unrotated_cache:
            k = ref.apply_rotary_embedding(k, positions)
        if rope_values:
            v = ref.apply_rotary_embedding(v, positions)
    if past is not None:
        k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
    cache = (k, v)
    if rope and (rerotate or unrotated_cache):
        k = ref.apply_rotary_embedding(k, torch.arange(start + length))
        cache = (k, v) if rerotate else cache
    n_rep = layer.num_heads // layer.num_kv_heads
    if tiled:
        k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
    else:
        k, v = ref.repeat_kv(k, n_rep), ref.repeat_kv(v, n_rep)
    if causal == "past_only":  # the new queries read the cached keys only, not their own (cs249r_book#1953)
        k, v, causal = k[..., :start, :], v[..., :start, :], "none"
    mask = {"offset": ref.causal_mask(length, start + length),
            "inverted": ~ref.causal_mask(length, start + length),
            "none": None,
            "start": torch.ones(length, start + length, dtype=torch.bool).tril()}[causal]
    if causal == "inverted":  # torch.triu(..., 1) handed to F.scaled_dot_product_attention (LLMs-from-scratch#1061)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                             scale=scale if scale is not None else 1 / math.sqrt(layer.d_head))
    else:
        scores = q @ k.transpose(-2, -1) * (scale if scale is not None else 1 / math.sqrt(layer.d_head))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        out = scores.softmax(-1) @ v
    out = out.reshape(b, length, d) if no_transpose else out.transpose(1, 2).reshape(b, length, d)
    return layer.w_o(out), cache


def _gqa_mistakes(layer: ref.GroupedQueryAttention, x: torch.Tensor, past: ref.PastKV | None
                  ) -> dict[str, torch.Tensor | None]:
    cached = past is not None
    return {
        f"the values are rotated too; rotary embeddings apply to queries and keys only ({SECTION_LAYER}).":
            _gqa(layer, x, past, rope_values=True)[0],
        f"the rotation pairs features (i, i + d/2) (the 'rotate_half' layout); rotate neighbouring pairs (2i, 2i+1) "
        f"with apply_rotary_embedding ({SECTION_LAYER}).": _gqa(layer, x, past, halves=True)[0],
        f"no rotary embeddings: rotate the queries and keys with apply_rotary_embedding ({SECTION_LAYER}).":
            _gqa(layer, x, past, rope=False)[0],
        f"with a cache of P tokens, the new tokens are rotated as positions 0, 1, ...; they sit at P, P + 1, ... "
        f"({SECTION_LAYER}).": _gqa(layer, x, past, restart=True)[0] if cached else None,
        f"the cached keys are rotated again: they were stored after their rotation, so rotate only the new keys "
        f"({SECTION_LAYER}).": _gqa(layer, x, past, rerotate=True)[0] if cached else None,
        f"no causal mask: query i must not see the keys after it ({SECTION_LAYER}).":
            _gqa(layer, x, past, causal="none")[0],
        f"with a cache the causal mask is not shifted: query i sits at position P + i and sees keys 0 .. P + i "
        f"(an (L, P + L) mask, tril(P)) ({SECTION_LAYER}).": _gqa(layer, x, past, causal="start")[0] if cached else None,
        f"query head i meets key/value head i % num_kv_heads: heads repeated as a whole list ([a, b, a, b]), or "
        f"queries grouped as (repeats, kv heads); head i belongs to kv head i // (num_heads / num_kv_heads), as "
        f"repeat_kv does ({SECTION_GQA}).":
            _gqa(layer, x, past, tiled=True)[0] if 1 < layer.num_kv_heads < layer.num_heads else None,
        f"the scores are not scaled by 1/sqrt(d_head) ({SECTION_LAYER}).": _gqa(layer, x, past, scale=1.0)[0],
        f"the mask is inverted: query i sees only the keys AFTER it. A boolean mask means 'may attend' where True "
        f"(F.scaled_dot_product_attention); torch.triu(..., 1) marks the keys to HIDE ({SECTION_LAYER}).":
            _gqa(layer, x, past, causal="inverted")[0],
        f"with a cache the new queries attend to the cached keys only; they also see their own keys, up to their "
        f"position ({SECTION_LAYER}).": _gqa(layer, x, past, causal="past_only")[0] if cached else None,
        f"the heads are merged without .transpose(1, 2) first: (B, h, L, d_head) -> (B, L, h, d_head), then reshape "
        f"({SECTION_LAYER}).": _gqa(layer, x, past, no_transpose=True)[0] if layer.num_heads > 1 and x.size(1) > 1 else None,
        f"the scores are scaled by 1/sqrt(d_model); use d_head, the size of one head ({SECTION_LAYER}).":
            _gqa(layer, x, past, scale=1 / math.sqrt(x.size(-1)))[0],
    }


def _unpack_attention(result: Any, what: str) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    if not isinstance(result, tuple | list) or len(result) != 2 or not isinstance(result[1], tuple | list) \
            or len(result[1]) != 2:
        raise AssertionError(f"{what} should return (output, (k, v)), got {type(result).__name__}"
                             f"{'' if not isinstance(result, tuple | list) else f' of {len(result)} values'}.")
    return as_tensor(result[0], f"{what}'s output"), (as_tensor(result[1][0], f"{what}'s cached keys"),
                                                     as_tensor(result[1][1], f"{what}'s cached values"))


def check_GroupedQueryAttention(ns: dict[str, Any]) -> None:  # noqa: N802 (the class's name)
    gen = generator(805)
    deps = ("apply_rotary_embedding", "repeat_kv")
    for d, h, h_kv, b, length, cached in [(16, 4, 2, 2, 5, 0), (16, 4, 2, 2, 3, 4), (12, 3, 3, 1, 4, 2),
                                          (8, 4, 1, 2, 1, 6), (24, 6, 2, 1, 6, 0)]:
        mine, reference = _pair(ns, "GroupedQueryAttention", d, h, h_kv, gen=gen, deps=deps)
        x = randn(b, length, d, gen=gen)
        past = None
        if cached:
            with torch.no_grad():
                _, past = reference(randn(b, cached, d, gen=gen))
        label = "multi-head, " if h_kv == h else "multi-query, " if h_kv == 1 else ""
        what = (f"GroupedQueryAttention({d}, num_heads={h}, num_kv_heads={h_kv}) ({label}x {(b, length, d)}"
                + (f", a cache of {cached} tokens)" if cached else ", no cache)"))
        args = (x,) if past is None else (x, past)
        got, (k, v) = _unpack_attention(_call(ns, mine, "GroupedQueryAttention.forward", *args, deps=deps, grad=True),
                                        what)
        expected, (ek, ev) = reference(*args)
        with torch.no_grad():
            mistakes = _gqa_mistakes(reference, x, past)
            if cached:
                unrotated = _gqa(reference, x, past, unrotated_cache=True)[1][0]
        assert_matches(got, expected, what, mistakes,
                       hint=f"Expected w_o of causal attention with rotated queries and keys ({SECTION_LAYER}).")
        assert_matches(k, ek.detach(), f"{what}: the key cache", {
            f"the cache holds the keys before their rotation; store them rotated (a key's position never changes) "
            f"({SECTION_LAYER}).": unrotated if cached else None,
        }, hint=f"Expected the cached keys, then the new ones, rotated ({SECTION_LAYER}).")
        assert_matches(v, ev.detach(), f"{what}: the value cache",
                       hint=f"Expected the cached values, then the new ones ({SECTION_LAYER}).")
        _gradients(got, expected, mine, reference, what, 8050)
    # On another device (meta stands in for a GPU): the positions and the mask are made on x's device.
    meta = torch.device("meta")
    with reference_for(ns, **upstream(*deps)):
        mine = construct(student_name(ns, "GroupedQueryAttention"), "GroupedQueryAttention", 16, 4, 2).to(meta)
    x = torch.empty(2, 3, 16, device=meta)
    past = (torch.empty(2, 2, 4, 4, device=meta), torch.empty(2, 2, 4, 4, device=meta))
    for args, label in (((x,), "no cache"), ((x, past), "a cache of 4 tokens")):
        on_another_device(lambda args=args: _call(ns, mine, "GroupedQueryAttention.forward", *args, deps=deps),
                          f"GroupedQueryAttention on a GPU ({label})",
                          f"the positions (`torch.arange`) or the causal mask (`torch.ones`) ({SECTION_LAYER})")


# ---------------------------------------------------------------------------------- tiled attention
def _tiles(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tile: int, causal: bool, *,
           fix_acc: bool = True, fix_sum: bool = True, scale: bool = True, align_end: bool = True,
           normalise: bool = True) -> torch.Tensor:
    """The online softmax, right (by default) and with one known mistake, in float64."""
    q, k, v = q.double(), k.double(), v.double()
    lq, lk = q.size(-2), k.size(-2)
    m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=torch.float64)
    total = torch.zeros_like(m)
    acc = torch.zeros((*q.shape[:-1], v.size(-1)), dtype=torch.float64)
    rows = torch.arange(lq)[:, None] + (lk - lq if align_end else 0)
    for s in range(0, lk, tile):
        scores = q @ k[..., s:s + tile, :].transpose(-2, -1) * (1 / math.sqrt(q.size(-1)) if scale else 1.0)
        if causal:
            scores = scores.masked_fill(torch.arange(s, min(s + tile, lk))[None, :] > rows, float("-inf"))
        new = torch.maximum(m, scores.amax(-1, keepdim=True))
        safe = new.masked_fill(torch.isinf(new), 0.0)
        correction = torch.exp(m - safe)
        p = torch.exp(scores - safe)
        total = (total * correction if fix_sum else total) + p.sum(-1, keepdim=True)
        acc = (acc * correction if fix_acc else acc) + p @ v[..., s:s + tile, :]
        m = new
    return acc / total if normalise else acc


def check_online_softmax_attention(ns: dict[str, Any]) -> None:
    fn = student_name(ns, "online_softmax_attention")
    gen = generator(806)
    cases = [((2, 3), 10, 37, 8, 5, 7, False, 1.0), ((1, 2), 16, 16, 4, 4, 16, True, 1.0),
             ((2,), 9, 20, 8, 8, 1, True, 1.0), ((1, 1), 1, 33, 8, 3, 16, True, 1.0),
             ((2, 2), 12, 12, 16, 16, 64, False, 1.0), ((1, 2), 8, 40, 8, 4, 8, True, 12.0),
             ((3,), 6, 25, 4, 6, 4, False, 10.0)]
    for lead, lq, lk, d, dv, tile, causal, size in cases:
        q = randn(*lead, lq, d, gen=gen) * size
        k = randn(*lead, lk, d, gen=gen) * size
        v = randn(*lead, lk, dv, gen=gen)
        mask = ref.causal_mask(lq, lk) if causal else None
        expected = ref.attention(q.double(), k.double(), v.double(), mask).float()
        what = (f"online_softmax_attention(q {(*lead, lq, d)}, k {(*lead, lk, d)}, v {(*lead, lk, dv)}, "
                f"tile_size={tile}, causal={causal})" + (" with large scores" if size > 1 else ""))
        got = fn(q, k, v, tile, causal)

        def wrong(q=q, k=k, v=v, tile=tile, causal=causal, **kw: bool) -> torch.Tensor:
            return _tiles(q, k, v, tile, causal, **kw).float()

        mistakes = {
            f"the running output is not rescaled by exp(m_old - m_new) when the maximum grows ({SECTION_TILES}).":
                wrong(fix_acc=False) if lk > tile else None,
            f"the running sum is not rescaled by exp(m_old - m_new) when the maximum grows ({SECTION_TILES}).":
                wrong(fix_sum=False) if lk > tile else None,
            f"neither the running sum nor the running output is rescaled when the maximum grows ({SECTION_TILES}).":
                wrong(fix_sum=False, fix_acc=False) if lk > tile else None,
            f"the scores are not scaled by 1/sqrt(d) ({SECTION_TILES}).": wrong(scale=False),
            f"the output is not divided by the running sum at the end ({SECTION_TILES}).": wrong(normalise=False),
            f"the causal mask counts query i as position i; the queries are the LAST L_q positions, so query i sees "
            f"keys 0 .. L_k - L_q + i ({SECTION_TILES}).": wrong(align_end=False) if causal and lq < lk else None,
            f"causal=True is ignored ({SECTION_TILES}).": ref.attention(q.double(), k.double(), v.double()).float()
            if causal else None,
            f"the keys are padded with zeros to whole tiles and the padding takes part in the softmax (a score of 0 "
            f"each): mask the padded keys, or cut the last tile short ({SECTION_TILES}).": ref.attention(
                q.double(), F.pad(k.double(), (0, 0, 0, -lk % tile)), F.pad(v.double(), (0, 0, 0, -lk % tile))).float()
            if lk % tile and not causal else None,
            f"the last tile is skipped when tile_size does not divide L_k; it holds the remaining keys "
            f"({SECTION_TILES}).": _tiles(q, k[..., :lk - lk % tile, :], v[..., :lk - lk % tile, :], tile, causal).float()
            if lk % tile and lk > tile and not causal else None,
        }
        if isinstance(got, torch.Tensor) and got.shape == expected.shape and not torch.isfinite(got).all():
            raise AssertionError(f"{what} contains inf/NaN: the running maximum must be max(m_old, the tile's "
                                 f"maximum), so that exp(m_old - m_new) <= 1 never overflows ({SECTION_TILES}).")
        assert_matches(got, expected, what, mistakes, tol=F32,
                       hint=f"Expected softmax(q k^T / sqrt(d)) v over all L_k keys, to 1e-5 ({SECTION_TILES}).")
    _expect_error(lambda: ns["online_softmax_attention"](q, k, v, 0), "online_softmax_attention(..., tile_size=0)",
                  ValueError, "a tile holds at least one key")
    q = torch.empty(1, 2, 6, 8, device="meta")
    k = torch.empty(1, 2, 10, 8, device="meta")
    on_another_device(lambda: fn(q, k, k, 4, True), "online_softmax_attention(q, k, v on a GPU, causal=True)",
                      f"the running maximum, sum or output (`torch.full`, `torch.zeros`: `query.new_full` and "
                      f"`query.new_zeros` take query's device) or the positions of the causal mask ({SECTION_TILES})")


# ------------------------------------------------------------------------------------ the block
def _block(block: ref.DecoderBlock, x: torch.Tensor, past: ref.PastKV | None, kind: str) -> torch.Tensor:
    attn = lambda y: block.attn(y, past)[0]  # noqa: E731
    if kind == "post":
        x = block.attn_norm(x + attn(x))
        return block.ffn_norm(x + block.ffn(x))
    if kind == "no_residual":
        h = attn(block.attn_norm(x))
        return h + block.ffn(block.ffn_norm(h))
    if kind == "normalised_stream":
        x = block.attn_norm(x)
        x = x + attn(x)
        x = block.ffn_norm(x)
        return x + block.ffn(x)
    if kind == "parallel":
        return x + attn(block.attn_norm(x)) + block.ffn(block.ffn_norm(x))
    if kind == "one_norm":
        x = x + attn(block.attn_norm(x))
        return x + block.ffn(block.attn_norm(x))
    if kind == "residual_inside":
        x = block.attn(block.attn_norm(x) + x, past)[0]
        return block.ffn(block.ffn_norm(x) + x)
    if kind == "doubled":  # x = attn(...); x = x + x (BitNet#32): the block's input never reaches the stream
        h = attn(block.attn_norm(x))
        h = h + h
        return h + block.ffn(block.ffn_norm(h))
    if kind == "second_normalised":  # the feed-forward's residual starts from ffn_norm(x) (MONAI#9011)
        x = block.ffn_norm(x + attn(block.attn_norm(x)))
        return x + block.ffn(x)
    if kind == "ffn_unnormalised":
        x = x + attn(block.attn_norm(x))
        return x + block.ffn(x)
    raise ValueError(kind)


def check_DecoderBlock(ns: dict[str, Any]) -> None:  # noqa: N802 (the class's name)
    gen = generator(807)
    deps = ("RMSNorm", "GroupedQueryAttention", "SwiGLU", "apply_rotary_embedding", "repeat_kv")
    for d, h, h_kv, d_ff, b, length, cached in [(16, 4, 2, 24, 2, 5, 0), (8, 2, 1, 16, 1, 3, 4), (12, 3, 3, 8, 2, 1, 2)]:
        mine, reference = _pair(ns, "DecoderBlock", d, h, h_kv, d_ff, gen=gen, deps=deps)
        x = randn(b, length, d, gen=gen) * 2
        past = None
        if cached:
            with torch.no_grad():
                _, past = reference(randn(b, cached, d, gen=gen))
        args = (x,) if past is None else (x, past)
        what = f"DecoderBlock({d}, {h}, {h_kv}, {d_ff}) on x {(b, length, d)}" + (
            f" with a cache of {cached} tokens" if cached else "")
        got, (k, _) = _unpack_attention(_call(ns, mine, "DecoderBlock.forward", *args, deps=deps, grad=True), what)
        expected, (ek, _) = reference(*args)
        with torch.no_grad():
            mistakes = {
                f"the block is post-LN (the norm after the residual addition); a pre-LN block normalises the input of "
                f"each sub-layer: x + attn(attn_norm(x)) ({SECTION_BLOCK}).": _block(reference, x, past, "post"),
                f"there is no residual connection: add each sub-layer's output to its input ({SECTION_BLOCK}).":
                    _block(reference, x, past, "no_residual"),
                f"the normalised x replaces the residual stream; normalise only the sub-layer's input, and add its "
                f"output to the un-normalised x ({SECTION_BLOCK}).": _block(reference, x, past, "normalised_stream"),
                f"the feed-forward reads x from before the attention (a parallel block); it reads x + attention "
                f"({SECTION_BLOCK}).": _block(reference, x, past, "parallel"),
                f"attn_norm is used before the feed-forward too; use ffn_norm there ({SECTION_BLOCK}).":
                    _block(reference, x, past, "one_norm"),
                f"the residual is added to the sub-layer's input (sublayer(norm(x) + x)); add it to the output: "
                f"x + sublayer(norm(x)) ({SECTION_BLOCK}).": _block(reference, x, past, "residual_inside"),
                f"the feed-forward's input is not normalised (ffn_norm) ({SECTION_BLOCK}).":
                    _block(reference, x, past, "ffn_unnormalised"),
                f"the attention's output is added to itself (x = attn(...); x = x + x), so the block's input never "
                f"reaches the residual stream: add the output to the input x ({SECTION_BLOCK}).":
                    _block(reference, x, past, "doubled"),
                f"the second residual starts from ffn_norm(x): the normalised x replaces the residual stream before "
                f"the feed-forward; add its output to the un-normalised x ({SECTION_BLOCK}).":
                    _block(reference, x, past, "second_normalised"),
            }
        assert_matches(got, expected, what, mistakes,
                       hint=f"Expected x + attn(attn_norm(x)), then + ffn(ffn_norm(...)) ({SECTION_BLOCK}).")
        assert_matches(k, ek.detach(), f"{what}: the cache it returns",
                       hint=f"Return the attention's new cache ({SECTION_BLOCK}).")
        _gradients(got, expected, mine, reference, what, 8070)


# ----------------------------------------------------------------------------- the language model
def _lm(model: ref.DecoderLM, tokens: torch.Tensor, past: list | None, kind: str) -> torch.Tensor:
    x = model.embedding(tokens)
    if kind == "scaled":
        x = x * math.sqrt(x.size(-1))
    for i, layer in enumerate(model.layers):
        x, _ = layer(x, None if past is None else past[0 if kind == "first_cache" else i])
    return model.lm_head(x if kind == "no_norm" else model.norm(x))


def _assert_tied(model: torch.nn.Module, args: tuple) -> None:
    """lm_head.weight is the embedding's Parameter: one tensor among the parameters, and a write to the
    embedding is seen by lm_head. Tested by behaviour: a judged kernel's tensors reach the checks as copies."""
    what = f"DecoderLM({', '.join(map(str, args))})"
    vocab, d = args[0], args[1]
    count = len(list(model.parameters()))
    head, embedding = model.lm_head.weight.detach().clone(), model.embedding.weight.detach().clone()
    same_storage = False
    if tuple(head.shape) == (vocab, d):
        probe = torch.randn(vocab, d, generator=generator(8081))
        with torch.no_grad():
            model.embedding.weight.copy_(probe)
        same_storage = torch.equal(model.lm_head.weight.detach(), probe)
        with torch.no_grad():
            model.embedding.weight.copy_(embedding)
    if same_storage and count == len(list(ref.DecoderLM(*args).parameters())):
        return
    if same_storage:
        why = ("lm_head.weight shares the embedding's storage (.data) but is a second Parameter: the optimizer "
               "would keep two sets of state for one matrix. Assign the Parameter itself")
    elif tuple(head.shape) == (vocab, d) and torch.equal(head, embedding):
        why = ("lm_head.weight holds a COPY of the embedding (.clone() or a new nn.Parameter), which drifts apart "
               "during training; assign the parameter itself")
    else:
        why = "lm_head.weight is not the embedding's weight; tie them"
    raise AssertionError(f"{what}: {why}: lm_head's weight must be the very Parameter object of the embedding "
                         f"({SECTION_LM}).")


def check_DecoderLM(ns: dict[str, Any]) -> None:  # noqa: N802 (the class's name)
    gen = generator(808)
    deps = ("DecoderBlock", "RMSNorm", "GroupedQueryAttention", "SwiGLU", "apply_rotary_embedding", "repeat_kv")
    cls = student_name(ns, "DecoderLM")
    for vocab, d, h, h_kv, d_ff, layers, b, length, cached in [(20, 16, 4, 2, 24, 2, 2, 5, 0),
                                                                (11, 8, 2, 1, 8, 3, 1, 2, 3), (7, 12, 3, 3, 16, 1, 2, 4, 2)]:
        args = (vocab, d, h, h_kv, d_ff, layers)
        with reference_for(ns, **upstream(*deps)):
            mine = construct(cls, "DecoderLM", *args)
        head, embedding = getattr(mine, "lm_head", None), getattr(mine, "embedding", None)
        if not is_instance(embedding, torch.nn.Embedding) or not is_instance(head, torch.nn.Linear):
            raise AssertionError(f"DecoderLM needs `embedding` (nn.Embedding) and `lm_head` (nn.Linear), got "
                                 f"{type_name(embedding)} and {type_name(head)}; keep the stub's __init__ ({SECTION_LM}).")
        _assert_tied(mine, args)
        reference = randomise(ref.DecoderLM(*args), gen, scale=0.4)
        copy_parameters(mine, reference, f"DecoderLM{args}")
        tokens = torch.randint(0, vocab, (b, length), generator=gen)
        past = None
        if cached:
            with torch.no_grad():
                _, past = reference(torch.randint(0, vocab, (b, cached), generator=gen))
        call = (tokens,) if past is None else (tokens, past)
        what = f"DecoderLM({', '.join(map(str, args))}) on tokens {(b, length)}" + (
            f" with caches of {cached} tokens" if cached else "")
        result = _call(ns, mine, "DecoderLM.forward", *call, deps=deps, grad=True)
        if not isinstance(result, tuple | list) or len(result) != 2 or not isinstance(result[1], tuple | list):
            raise AssertionError(f"{what} should return (logits, presents), a list with one (k, v) per layer "
                                 f"({SECTION_LM}).")
        got, presents = as_tensor(result[0], f"{what}'s logits"), result[1]
        expected, expected_presents = reference(*call)
        with torch.no_grad():
            mistakes = {
                f"the embeddings are multiplied by sqrt(d_model) (notebook 05's habit); this model feeds them as they "
                f"are ({SECTION_LM}).": _lm(reference, tokens, past, "scaled"),
                f"the final RMSNorm (`self.norm`) is not applied before lm_head; pre-LN blocks leave the residual "
                f"stream un-normalised ({SECTION_LM}).": _lm(reference, tokens, past, "no_norm"),
                f"every layer is given past_kvs[0], the first layer's cache; layer i reads its own, past_kvs[i] "
                f"({SECTION_LM}).": _lm(reference, tokens, past, "first_cache") if past is not None and layers > 1
                else None,
            }
        assert_matches(got, expected, what, mistakes,
                       hint=f"Expected lm_head(norm(blocks(embedding(tokens)))) ({SECTION_LM}).")
        if len(presents) != layers:
            raise AssertionError(f"{what} returned {len(presents)} caches; expected one per layer ({layers}) "
                                 f"({SECTION_LM}).")
        for i, (present, (ek, _)) in enumerate(zip(presents, expected_presents, strict=True)):
            if not isinstance(present, tuple | list) or len(present) != 2:
                raise AssertionError(f"{what}: presents[{i}] should be the layer's (k, v) ({SECTION_LM}).")
            assert_matches(present[0], ek.detach(), f"{what}: the keys of presents[{i}]",
                           hint=f"Layer i's cache comes from layer i, fed past_kvs[i] ({SECTION_LM}).")
        _gradients(got, expected, mine, reference, what, 8080)


# -------------------------------------------------------------------------------------- top-p
TABLE = torch.tensor([
    [3.0, 1.0, 0.2, -1.0, 0.5, 2.2],  # sharp
    [0.1, 0.0, 0.2, -0.1, 0.05, 0.15],  # nearly flat
    [1.0, 2.5, 1.0, 0.0, 2.0, -3.0],  # ties (inside or outside the nucleus, never across its edge)
    [-2.0, 5.0, 0.0, 0.0, 1.0, -1.0],  # one dominant token
])


def _top_p_mistakes(logits: torch.Tensor, p: float) -> dict[str, torch.Tensor | None]:
    sorted_logits, order = logits.sort(dim=-1, descending=True, stable=True)
    probs = sorted_logits.softmax(-1)
    cum = probs.cumsum(-1)

    def back(keep_sorted: torch.Tensor, fill: float = float("-inf"), values: torch.Tensor = logits) -> torch.Tensor:
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        return values.masked_fill(~keep, fill)

    right = cum - probs < p
    first = torch.zeros_like(right)
    first[..., 0] = True
    ascending_logits, ascending = logits.sort(dim=-1, stable=True)
    ascending_probs = ascending_logits.softmax(-1)
    keep_asc = ascending_probs.cumsum(-1) - ascending_probs < p
    by_rows = None
    if logits.dim() == 2 and p < 1:  # Hugging Face's shift by one, written [1:] on a 2-D tensor (fish-speech#1326)
        remove = cum >= p
        shifted = remove.clone()
        shifted[1:] = remove[:-1]
        shifted[0] = False
        by_rows = back(~shifted)
    return {
        f"the shift by one is along the rows ([1:] and [0] index rows of a 2-D tensor): shift along the last axis, "
        f"[..., 1:] and [..., 0] ({SECTION_SAMPLE}).": by_rows,
        f"one token too many is kept: a token whose preceding mass EQUALS top_p is outside the nucleus (keep "
        f"while it is BELOW top_p) ({SECTION_SAMPLE}).": back(cum - probs <= p) if p < 1 else None,
        f"the sorted decision is mapped back with gather; use scatter, which writes each decision to the index it "
        f"came from ({SECTION_SAMPLE}).": logits.masked_fill(~right.gather(-1, order), float("-inf")),
        f"the token that crosses top_p is dropped: keep a token when the probability ranked ABOVE it is below top_p, "
        f"so the kept ones add up to at least top_p ({SECTION_SAMPLE}).": back((cum < p) | first) if p < 1 else None,
        f"the token that crosses top_p is dropped, even the most likely one when it alone exceeds top_p (a row of "
        f"-inf): keep a token when the probability ranked ABOVE it is below top_p ({SECTION_SAMPLE}).":
            back(cum < p) if p < 1 else None,
        f"the sort is ascending: the nucleus is made of the MOST likely tokens ({SECTION_SAMPLE}).":
            logits.masked_fill(~torch.zeros_like(keep_asc).scatter(-1, ascending, keep_asc), float("-inf")),
        f"the cumulative sum is taken over the logits; add up the probabilities (softmax) ({SECTION_SAMPLE}).":
            back(sorted_logits.cumsum(-1) - sorted_logits < p) if p < 1 else None,
        f"the result is in sorted order; map the decision back to the vocabulary order (scatter) ({SECTION_SAMPLE}).":
            sorted_logits.masked_fill(~right, float("-inf")),
        f"the tokens outside the nucleus get 0; give them -inf, so that softmax gives them probability 0 "
        f"({SECTION_SAMPLE}).": back(right, 0.0) if p < 1 else None,
        f"the nucleus holds 1 - top_p of the probability; top_p is the mass KEPT ({SECTION_SAMPLE}).":
            ref.top_p_filter(logits, 1 - p) if 0 < 1 - p < 1 and abs(p - 0.5) > 0.05 else None,
        f"probabilities are returned; return the logits, with -inf outside the nucleus ({SECTION_SAMPLE}).":
            back(right, 0.0, logits.softmax(-1)),
    }


def _filtered(fn: Any, logits: torch.Tensor, p: float, what: str) -> torch.Tensor:
    """``fn(logits, p)`` on a copy: an answer that changes its input in place (``logits[...] = -inf``, as
    deepsparse#1414 did) must not change the table later checks and the reference read. (Judged, the
    kernel gets its own copy anyway, so the change is not seen here and is not graded.)"""
    return as_tensor(fn(logits.clone(), p), what)


def _keeps_all(got: torch.Tensor, logits: torch.Tensor, what: str) -> None:
    dropped = int((got.isinf() & ~logits.isinf()).sum()) if got.shape == logits.shape else 0
    if dropped:
        raise AssertionError(f"{what}: top_p = 1 keeps every token, but {dropped:,} of {logits.numel():,} got -inf "
                             f"(in floating point a running sum can reach 1 before the last token, or round past "
                             f"it): at top_p = 1 return the logits as they are ({SECTION_SAMPLE}).")


def check_top_p_filter(ns: dict[str, Any]) -> None:
    fn = student_name(ns, "top_p_filter")
    for p in (0.3, 0.6, 0.9, 0.97, 1.0):
        for dtype in (torch.float32, torch.float64):
            logits = TABLE.to(dtype)
            what = f"top_p_filter(the (4, 6) logit table, top_p={p}) in {str(dtype).replace('torch.', '')}"
            got = _filtered(fn, logits, p, what)
            if p == 1:
                _keeps_all(got, logits, what)
            assert_matches(got, ref.top_p_filter(logits, p),
                           what, _top_p_mistakes(logits, p),
                           hint=f"Expected the logits of the fewest most likely tokens whose probabilities reach "
                                f"top_p, and -inf elsewhere ({SECTION_SAMPLE}).")
    # An exact edge (probabilities 1/2, 1/4, 1/8, 1/8 are exact in float32): top_p = 0.5 is reached by the first
    # token alone, 0.75 by the first two.
    halves = torch.tensor([[0.5, 0.25, 0.125, 0.125], [0.125, 0.25, 0.125, 0.5]]).log()
    for p in (0.5, 0.75):
        assert_matches(fn(halves, p), ref.top_p_filter(halves, p), f"top_p_filter(log([1/2, 1/4, 1/8, 1/8]), top_p={p})", _top_p_mistakes(halves, p),
                       hint=f"Expected the fewest most likely tokens that reach top_p ({SECTION_SAMPLE}).")
    # Ties across the nucleus's edge, in rows long enough that an unstable sort reorders them (300 tokens on 4
    # levels; at 6 tokens the CPU's sort happens to keep ties in order): the text ranks ties by index.
    ties = torch.randint(0, 4, (3, 300), generator=torch.Generator().manual_seed(8)).double()
    for p in (0.3, 0.6):
        what = f"top_p_filter(logits (3, 300) on four levels, many tied, top_p={p})"
        got, want = as_tensor(fn(ties.clone(), p), what), ref.top_p_filter(ties, p)
        if got.shape == want.shape and not torch.equal(got.isinf(), want.isinf()) and torch.equal(
                got.masked_fill(got.isinf(), -1.0).sort(-1).values, want.masked_fill(want.isinf(), -1.0).sort(-1).values):
            raise AssertionError(f"{what}: as many tokens are kept at each logit as expected, but not the right ones "
                                 "among equal logits: rank ties by index, with a stable sort ('stable=True'), so "
                                 f"that the earlier of two equal tokens is kept first ({SECTION_SAMPLE}).")
        assert_matches(got, want, what, hint=f"Expected the fewest most likely tokens that reach top_p, ties ranked "
                                             f"by index ({SECTION_SAMPLE}).")
    # A vocabulary of LLM size: top_p = 1 keeps all of it, a tiny top_p the most likely token only.
    wide = torch.randn(2, 50_000, generator=torch.Generator().manual_seed(81)) * 2
    what = "top_p_filter(logits (2, 50000) float32, top_p=1.0)"
    _keeps_all(_filtered(fn, wide, 1.0, what), wide, what)
    what = "top_p_filter(the (4, 6) logit table, top_p=1e-08)"
    tiny = _filtered(fn, TABLE, 1e-8, what)
    if tiny.shape == TABLE.shape and tiny.isinf().all(-1).any():
        raise AssertionError(f"{what}: a row with every token at -inf: the most likely token is always in the "
                             f"nucleus, however small top_p is (keep a token while the mass ranked ABOVE it is below "
                             f"top_p) ({SECTION_SAMPLE}).")
    assert_matches(tiny, ref.top_p_filter(TABLE, 1e-8), what,
                   hint=f"Expected the most likely token of each row alone ({SECTION_SAMPLE}).")
    batched = TABLE.reshape(2, 2, 6)
    assert_matches(fn(batched, 0.7), ref.top_p_filter(batched, 0.7), "top_p_filter(logits (2, 2, 6), top_p=0.7)",
                   hint=f"Filter each row over its last axis ({SECTION_SAMPLE}).")
    for bad in (0.0, -0.5, 1.5):
        _expect_error(lambda bad=bad: ns["top_p_filter"](TABLE, bad), f"top_p_filter(logits, top_p={bad})",
                      ValueError, "top_p must be in (0, 1]")


# ------------------------------------------------------------------------------------- sampling
DRAWS = 40_000


def _distribution(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    return ref.top_p_filter(logits / temperature, top_p).softmax(-1)


def _frequencies(draws: Any, vocab: int, what: str) -> torch.Tensor:
    draws = as_tensor(draws, what)
    if draws.shape != (DRAWS,) or draws.dtype != torch.int64:
        raise AssertionError(f"{what} should return one int64 token id per row, shape ({DRAWS},), got "
                             f"{draws.dtype} {tuple(draws.shape)} ({SECTION_SAMPLE}).")
    if draws.min() < 0 or draws.max() >= vocab:
        raise AssertionError(f"{what} returned ids outside 0 .. {vocab - 1} ({SECTION_SAMPLE}).")
    return torch.bincount(draws, minlength=vocab).double() / DRAWS


def _matches(freq: torch.Tensor, probs: torch.Tensor, draws: int = DRAWS) -> bool:
    """Within 5 standard deviations of the expected frequency (and exactly 0 where it is 0)."""
    probs = probs.double()
    bound = 5 * (probs * (1 - probs) / draws).sqrt() + 1e-3
    return bool(((freq - probs).abs() <= bound).all() and (freq[probs == 0] == 0).all())


def check_sample_next_token(ns: dict[str, Any]) -> None:
    fn = student_name(ns, "sample_next_token")
    logits = TABLE[0]
    vocab = logits.numel()
    with reference_for(ns, **upstream("top_p_filter")):
        for seed, (temperature, top_p) in enumerate([(1.0, 1.0), (0.5, 1.0), (2.0, 0.9), (1.0, 0.7), (0.7, 0.8)]):
            torch.manual_seed(seed)
            what = f"sample_next_token(logits (40000, 6), temperature={temperature}, top_p={top_p})"
            freq = _frequencies(fn(logits.expand(DRAWS, vocab).clone(), temperature, top_p), vocab, what)
            expected = _distribution(logits, temperature, top_p)
            if _matches(freq, expected):
                record(f"{what}: the tokens drawn", (freq > 0).to(torch.int64), None)
                continue
            mistakes = {
                "the temperature is applied after top_p chose the nucleus; divide the logits by the temperature "
                "first": (ref.top_p_filter(logits, top_p) / temperature).softmax(-1) if temperature != 1 else None,
                "the logits are multiplied by the temperature; divide them": _distribution(
                    logits * temperature * temperature, temperature, top_p) if temperature != 1 else None,
                "the temperature is ignored": _distribution(logits, 1.0, top_p) if temperature != 1 else None,
                "top_p is ignored": _distribution(logits, temperature, 1.0) if top_p < 1 else None,
                "the most likely token is always returned": F.one_hot(logits.argmax(), vocab).double(),
                "the draws are uniform over the vocabulary": torch.full((vocab,), 1 / vocab),
            }
            named = next((m for m, wrong in mistakes.items() if wrong is not None and _matches(freq, wrong)), None)
            shown = ", ".join(f"{f:.3f}" for f in freq.tolist())
            raise AssertionError(
                f"{what}: " + (f"{named} ({SECTION_SAMPLE})." if named else
                               f"the frequencies of {DRAWS:,} draws ({shown}) are not those of "
                               f"softmax(top_p_filter(logits / temperature, top_p)) ({SECTION_SAMPLE})."))
        # Two different rows in one batch: each row's draws come from its own nucleus (a sort order taken
        # from one row and used for all, as in mlx-vlm#1094, passes when every row is the same).
        half = DRAWS // 2
        rows = torch.stack([TABLE[0], TABLE[3].flip(-1)])
        torch.manual_seed(7)
        what = "sample_next_token(logits (40000, 6), two different rows, temperature=1.0, top_p=0.5)"
        draws = fn(rows.repeat_interleave(half, dim=0), 1.0, 0.5)
        _frequencies(draws, vocab, what)  # the shape, dtype and range of the result
        draws = as_tensor(draws, what)
        for i in range(2):
            mine = torch.bincount(draws[i * half:(i + 1) * half], minlength=vocab).double() / half
            nucleus = _distribution(rows[i], 1.0, 0.5)
            outside = mine[nucleus == 0].sum().item()
            if outside > 0:
                raise AssertionError(f"{what}: {outside:.1%} of row {i}'s draws are outside its own nucleus: sort, "
                                     f"filter and draw each row on its own (along the last axis) ({SECTION_SAMPLE}).")
            if not _matches(mine, nucleus, half):
                raise AssertionError(f"{what}: row {i}'s draws do not follow softmax(top_p_filter(its logits, 0.5)); "
                                     f"each row is sampled from its own distribution ({SECTION_SAMPLE}).")
        try:
            greedy = fn(TABLE.clone(), 0.0)
        except AssertionError as error:  # the student's exception, as the guard words it
            if " raised " not in str(error):
                raise
            raise AssertionError(f"temperature 0 means greedy: return the argmax before dividing by the temperature "
                                 f"(logits / 0 is inf, and softmax of inf is NaN) ({SECTION_SAMPLE}). {error}") from None
        assert_matches(as_tensor(greedy, "sample_next_token(..., temperature=0)"), TABLE.argmax(-1),
                       "sample_next_token(the (4, 6) table, temperature=0)",
                       hint=f"Temperature 0 returns the most likely token of each row ({SECTION_SAMPLE}).")
    _expect_error(lambda: ns["sample_next_token"](TABLE.clone(), -1.0), "sample_next_token(logits, temperature=-1)",
                  ValueError, "a temperature must be >= 0")
    with reference_for(ns, **upstream("top_p_filter")):
        on_another_device(lambda: fn(torch.empty(3, 6, device="meta"), 0.8, 0.9),
                          "sample_next_token(logits on a GPU, temperature=0.8, top_p=0.9)",
                          f"the random numbers (`torch.rand`: pass `device=logits.device`, or use `torch.rand_like`) "
                          f"({SECTION_SAMPLE})")


# ------------------------------------------------------------------------------------ generation
class RecordingModel(torch.nn.Module):
    """A stand-in language model over ``vocab`` tokens that records its calls. Its logits at a position
    favour ``(token + position + 1) % vocab``, so the greedy text depends on every position being right;
    its caches are ``(k, v)`` tensors of the right length, so a wrongly fed cache shows."""

    def __init__(self, vocab: int = 9):
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # so that .parameters() and .eval() work as usual
        self.vocab = vocab
        self.calls: list[tuple[int, int | None]] = []  # (new tokens, cached tokens or None)

    def forward(self, tokens: torch.Tensor, past_kvs: Any = None) -> tuple[torch.Tensor, list]:
        tokens = torch.as_tensor(tokens)
        past = None if past_kvs is None else int(torch.as_tensor(past_kvs[0][0]).size(2))
        self.calls.append((int(tokens.size(1)), past))
        start = past or 0
        cache = torch.zeros(tokens.size(0), 1, start + tokens.size(1), 1)
        return self.logits(tokens, torch.arange(start, start + tokens.size(1))), [(cache, cache.clone())]

    def logits(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        favourite = (tokens + positions + 1) % self.vocab
        return F.one_hot(favourite, self.vocab).double() * 4.0 + 0.01 * positions[None, :, None]


def _greedy(prompt: torch.Tensor, new: int, vocab: int, first: bool = False) -> torch.Tensor:
    """What a greedy :func:`generate` returns with :class:`RecordingModel`; ``first``: the first new token
    read from the prompt's first position instead of its last."""
    tokens = prompt
    for step in range(new):
        at = 0 if first and step == 0 else tokens.size(1) - 1
        tokens = torch.cat([tokens, ((tokens[:, at] + at + 1) % vocab)[:, None]], dim=1)
    return tokens


SPREAD = torch.tensor([2.0, 1.0, 0.5, 0.2, -0.5, -1.0, 0.8, 0.1, -2.0])  # next-token logits of SpreadModel


class SpreadModel(RecordingModel):
    """A stand-in whose next-token logits are always :data:`SPREAD`: for the distribution of a sampled token."""

    def __init__(self):
        super().__init__(vocab=SPREAD.numel())

    def logits(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return SPREAD.expand(*tokens.shape, -1).clone()


def check_generate(ns: dict[str, Any]) -> None:
    fn = student_name(ns, "generate")
    with reference_for(ns, **upstream("sample_next_token", "top_p_filter")):
        torch.manual_seed(0)  # an answer that samples where it should not: the same verdict in every run
        for prompt_shape, new in [((2, 3), 5), ((1, 1), 4), ((3, 2), 1)]:
            model = RecordingModel()
            prompt = torch.randint(0, model.vocab, prompt_shape, generator=generator(809 + new))
            what = f"generate(model, prompt {prompt_shape}, max_new_tokens={new}, temperature=0.0)"
            got = as_tensor(fn(model, prompt, new, 0.0), what)
            _assert_cache_use(list(model.calls), prompt_shape[1], new, what)
            if not torch.equal(got, as_tensor(fn(RecordingModel(), prompt.clone(), new, 0.0), what)):
                raise AssertionError(f"{what}: two calls gave different tokens, so they are sampled; at temperature=0.0 "
                                     f"generation is greedy: pass temperature and top_p on to sample_next_token "
                                     f"({SECTION_GENERATE}).")
            expected = _greedy(prompt, new, model.vocab)
            if got.shape == expected[:, prompt_shape[1]:].shape and torch.equal(got, expected[:, prompt_shape[1]:]):
                raise AssertionError(f"{what}: only the new tokens are returned; return the prompt followed by them "
                                     f"({SECTION_GENERATE}).")
            assert_matches(got, expected, what, {
                f"the next token is drawn from the logits of the FIRST position; use the last one, logits[:, -1] "
                f"({SECTION_GENERATE}).": _greedy(prompt, new, model.vocab, first=True) if prompt_shape[1] > 1 else None,
            }, hint=f"Expected the prompt, then at temperature=0.0 the most likely token at each step: the argmax of "
                    f"the last position's logits, which sample_next_token gives when it is passed temperature=0 "
                    f"({SECTION_GENERATE}).")
        # Sampling: the first new token of many rows, against the distribution temperature and top_p give.
        for seed, (temperature, top_p) in enumerate([(0.7, 0.9), (1.5, 1.0)]):
            torch.manual_seed(seed)
            what = f"generate(model, prompt ({DRAWS}, 2), max_new_tokens=1, temperature={temperature}, top_p={top_p})"
            out = as_tensor(fn(SpreadModel(), torch.zeros(DRAWS, 2, dtype=torch.int64), 1, temperature, top_p), what)
            if out.shape != (DRAWS, 3):
                raise AssertionError(f"{what} has shape {tuple(out.shape)}, expected ({DRAWS}, 3) ({SECTION_GENERATE}).")
            freq = _frequencies(out[:, -1].contiguous(), SPREAD.numel(), f"{what}'s new tokens")
            if _matches(freq, _distribution(SPREAD, temperature, top_p)):
                record(f"{what}: the tokens drawn", (freq > 0).to(torch.int64), None)
                continue
            mistakes = {
                "temperature and top_p are not passed on to sample_next_token": _distribution(SPREAD, 1.0, 1.0),
                "top_p is not passed on": _distribution(SPREAD, temperature, 1.0) if top_p < 1 else None,
                "the temperature is not passed on": _distribution(SPREAD, 1.0, top_p),
                "the temperature is applied after top_p chose the nucleus; divide the logits by the temperature first":
                    (ref.top_p_filter(SPREAD, top_p) / temperature).softmax(-1) if top_p < 1 else None,
                "the most likely token is always taken (greedy), whatever the temperature":
                    F.one_hot(SPREAD.argmax(), SPREAD.numel()).double(),
            }
            named = next((m for m, wrong in mistakes.items() if wrong is not None and _matches(freq, wrong)), None)
            raise AssertionError(f"{what}: " + (f"{named} ({SECTION_GENERATE})." if named else
                                 f"the new tokens are not drawn from softmax(top_p_filter(logits / temperature, "
                                 f"top_p)) of the last position ({SECTION_GENERATE})."))
        model = RecordingModel()
        prompt = torch.tensor([[1, 2]])
        got = as_tensor(fn(model, prompt, 0), "generate(model, prompt (1, 2), max_new_tokens=0)")
        assert_matches(got, prompt, "generate(model, prompt (1, 2), max_new_tokens=0)",
                       hint=f"With no new tokens, the prompt comes back as it is ({SECTION_GENERATE}).")


def _assert_cache_use(calls: list[tuple[int, int | None]], prompt_length: int, new: int, what: str) -> None:
    """The prompt once without caches, then one new token per call with the caches of the call before."""
    full_text = [(prompt_length + i, None) for i in range(new)]
    if new > 1 and calls[:new] == full_text:
        raise AssertionError(f"{what}: the model is called on the whole text at every step, without the caches; "
                             f"after the prompt, feed only the newest token with past_kvs ({SECTION_GENERATE}).")
    if calls and calls[0] != (prompt_length, None):
        raise AssertionError(f"{what}: the first call should read the whole prompt without a cache; it got "
                             f"{calls[0][0]} tokens{'' if calls[0][1] is None else ' and a cache'} ({SECTION_GENERATE}).")
    for step, (length, past) in enumerate(calls[1:], start=1):
        if past is not None and length > 1:
            raise AssertionError(f"{what}: call {step + 1} feeds {length} tokens together with the caches; the "
                                 f"cached tokens are then counted twice (and their positions shift). Feed only the "
                                 f"newest token ({SECTION_GENERATE}).")
        if past is None:
            raise AssertionError(f"{what}: call {step + 1} gets no caches; pass the presents of the call before "
                                 f"({SECTION_GENERATE}).")
        if past != prompt_length + step - 1:
            raise AssertionError(f"{what}: call {step + 1} got caches of {past} tokens, expected "
                                 f"{prompt_length + step - 1}: pass the presents the last call returned "
                                 f"({SECTION_GENERATE}).")
    if len(calls) > new + 1 or (new and len(calls) < new):
        raise AssertionError(f"{what}: the model was called {len(calls)} times for {new} new tokens; expected one "
                             f"call on the prompt, then one per new token ({SECTION_GENERATE}).")
