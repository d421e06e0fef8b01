"""Hidden checks for notebook 01 (self-attention without scaling)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from .. import nb01_self_attention as ref
from . import (
    assert_matches,
    copy_linear,
    forbid,
    generator,
    randn,
    reference_for,
    student_name,
    unpack_pair,
    upstream_from,
)

SECTION_SOFTMAX = "see section 1, 'A stable softmax'"
SECTION_SELF_ATTENTION = "see section 3, 'Self-attention'"

_BUILTIN_SOFTMAX = {
    (torch, "softmax"): "torch.softmax",
    (torch, "log_softmax"): "torch.log_softmax",
    (torch.Tensor, "softmax"): "Tensor.softmax",
    (torch.Tensor, "log_softmax"): "Tensor.log_softmax",
    (F, "softmax"): "torch.nn.functional.softmax",
    (F, "log_softmax"): "torch.nn.functional.log_softmax",
    (torch.special, "softmax"): "torch.special.softmax",
    (torch.nn.Softmax, "forward"): "nn.Softmax",
}


upstream = upstream_from(ref)

# These checks run in the grader's process, the student's code in the kernel (transformer_course.grading.judging.judge);
# the kernel's copy of the reference holds neither this module nor notebook 01's reference.
JUDGED = True


def _explained(call, hints: dict[str, str]):
    """``call()``; a one-line error from the student's code gets the hint of the first key it contains."""
    try:
        return call()
    except AssertionError as exc:
        message = str(exc)
        hint = next((h for key, h in hints.items() if key in message), None)
        if hint is None:
            raise
        raise AssertionError(f"{message.rstrip('.')} {hint}") from None


_KEEPDIM_HINT = {
    "must match the size of tensor": "(a max or sum along `dim` without keepdim=True drops that axis, "
    "so the subtraction or division lines up the wrong axes: pass keepdim=True to both; "
    f"{SECTION_SOFTMAX}).",
}
_LAST_TWO_AXES_HINT = dict.fromkeys(
    ("must match the size of tensor", "Dimension out of range", "mat1 and mat2 shapes",
     "Expected size for first two dimensions"),
    "(the scores are a matrix product of query and key with the key's LAST two axes swapped, "
    "whatever the number of batch axes: count the axes from the end, transpose(-2, -1); "
    "see section 2).",
)


def check_softmax(ns: dict[str, Any]) -> None:
    softmax = student_name(ns, "softmax")
    gen = generator(101)
    for shape, dim, dtype in [
        ((5,), -1, torch.float32),
        ((3, 7), -1, torch.float32),
        ((3, 7), 0, torch.float64),
        ((2, 4, 6), 1, torch.float32),
        ((2, 3, 4, 5), -2, torch.float64),
    ]:
        x = randn(*shape, gen=gen, dtype=dtype) * 3
        with forbid(_BUILTIN_SOFTMAX) as used:
            got = _explained(lambda x=x, dim=dim: softmax(x, dim=dim), _KEEPDIM_HINT)
        if used:
            raise AssertionError(
                f"softmax calls the built-in {used[0]}; this exercise is to write it by hand "
                f"from exp, sum and max ({SECTION_SOFTMAX})."
            )
        mistakes = {
            f"normalises over the last axis although dim={dim} was asked; use the `dim` "
            "argument in every reduction.": ref.softmax(x, dim=-1) if dim not in (-1, len(shape) - 1)
            else None,
            "returns exp(x) without dividing by the sum along `dim`.": x.exp(),
            "divides by the sum of ALL entries instead of the sum along `dim`; reduce with "
            "keepdim=True along `dim` only.": x.exp() / x.exp().sum(),
        }
        assert_matches(got, ref.softmax(x, dim=dim), f"softmax(x of shape {shape}, dim={dim})",
                       mistakes)
    for dtype in (torch.float32, torch.float64):
        big = randn(4, 6, gen=gen, dtype=dtype) * 1000
        got = softmax(big, dim=-1)
        if not torch.isfinite(torch.as_tensor(got)).all():
            raise AssertionError(
                f"softmax overflows on large inputs ({dtype}, values near +-1000 give inf/NaN): "
                f"subtract the maximum along `dim` before exp ({SECTION_SOFTMAX})."
            )
        assert_matches(got, ref.softmax(big, dim=-1), f"softmax on large {dtype} inputs")


def check_attention_scores(ns: dict[str, Any]) -> None:
    attention_scores = student_name(ns, "attention_scores")
    gen = generator(102)
    for q_shape, k_shape, dtype in [
        ((2, 3, 4), (2, 5, 4), torch.float32),
        ((1, 1, 8), (1, 6, 8), torch.float64),
        ((2, 3, 4, 6), (2, 3, 7, 6), torch.float32),
    ]:
        query, key = randn(*q_shape, gen=gen, dtype=dtype), randn(*k_shape, gen=gen, dtype=dtype)
        expected = ref.attention_scores(query, key)
        d_k = q_shape[-1]
        assert_matches(
            _explained(lambda query=query, key=key: attention_scores(query, key), _LAST_TWO_AXES_HINT),
            expected,
            f"attention_scores(query {q_shape}, key {k_shape})",
            {
                "is scaled by 1/sqrt(d_k); notebook 01 uses raw dot products (the scale "
                "is notebook 02's lesson).": expected / math.sqrt(d_k),
                "has the axes swapped: you computed key @ query^T; entry [i, j] must be "
                "query i . key j, shape (..., Lq, Lk).": expected.transpose(-2, -1),
            },
            hint="Expected query @ key^T over the last two axes.",
        )


def _self_attention_mistakes(x, w_q, w_k, w_v) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """(output, weights) of known mistakes, keyed by the message that names them."""
    query, key, value = x @ w_q, x @ w_k, x @ w_v
    scores = query @ key.transpose(-2, -1)
    d_k, d_model = w_q.shape[1], x.shape[-1]

    def attend(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return weights @ value, weights

    right = ref.softmax(scores, dim=-1)
    mistakes = {
        "softmax runs over the query axis; each query's weights must sum to 1 over the keys "
        f"(dim=-1) ({SECTION_SELF_ATTENTION}).": attend(ref.softmax(scores, dim=-2)),
        "softmax runs over the batch axis (dim=0); it must run over the keys (dim=-1).":
            attend(ref.softmax(scores, dim=0)) if x.shape[0] > 1 else None,
        "matches attention scaled by 1/sqrt(d_k); notebook 01 is the unscaled "
        "softmax(Q K^T) V.": attend(ref.softmax(scores / math.sqrt(d_k), dim=-1)),
        "is scaled by 1/sqrt(d_model); notebook 01 is the unscaled softmax(Q K^T) V.":
            attend(ref.softmax(scores / math.sqrt(d_model), dim=-1)),
        "returns the attention weights, not the weighted sum of the values.": (right, right),
        "uses the queries as values (weights @ Q instead of weights @ V).":
            (right @ query, right) if w_q.shape == w_v.shape else None,
    }
    return {k: v for k, v in mistakes.items() if v is not None}


def check_self_attention(ns: dict[str, Any]) -> None:
    self_attention = student_name(ns, "self_attention")
    gen = generator(103)
    for (b, length, d_model, d_k, d_v), dtype in [
        ((2, 5, 8, 4, 6), torch.float32),
        ((1, 1, 4, 4, 4), torch.float32),
        ((3, 4, 6, 6, 3), torch.float64),
    ]:
        x = randn(b, length, d_model, gen=gen, dtype=dtype)
        w_q, w_k, w_v = (randn(d_model, size, gen=gen, dtype=dtype) for size in (d_k, d_k, d_v))
        x, w_q, w_k = x * 0.5, w_q * 0.5, w_k * 0.5
        with reference_for(ns, **upstream("softmax", "attention_scores")):
            got = self_attention(x, w_q, w_k, w_v)
        assert_matches(
            got, ref.self_attention(x, w_q, w_k, w_v),
            f"self_attention(x {(b, length, d_model)}, w_q/w_k {(d_model, d_k)}, "
            f"w_v {(d_model, d_v)})",
            {k: out for k, (out, _) in _self_attention_mistakes(x, w_q, w_k, w_v).items()},
            hint="Expected softmax((x @ w_q) (x @ w_k)^T, dim=-1) @ (x @ w_v).",
        )


def check_SelfAttention(ns: dict[str, Any]) -> None:  # noqa: N802 (the SPEC's class name)
    cls = student_name(ns, "SelfAttention")
    gen = generator(104)
    for (b, length, d_model, d_k, d_v), dtype in [
        ((2, 5, 8, 4, 6), torch.float32),
        ((1, 3, 6, None, None), torch.float64),
    ]:
        torch_state = torch.random.get_rng_state()
        try:
            with reference_for(ns, **upstream("softmax", "attention_scores", "self_attention")):
                mine = cls(d_model) if d_k is None else cls(d_model, d_k=d_k, d_v=d_v)
        finally:
            torch.random.set_rng_state(torch_state)
        reference = ref.SelfAttention(d_model, d_k, d_v)
        for p in reference.parameters():
            with torch.no_grad():
                p.copy_(randn(*p.shape, gen=gen) * 0.5)
        copy_linear(mine, reference, ["w_q", "w_k", "w_v"])
        mine.to(dtype)
        reference.to(dtype)
        x = randn(b, length, d_model, gen=gen, dtype=dtype)
        with reference_for(ns, **upstream("softmax", "attention_scores", "self_attention")):
            out, weights = unpack_pair(mine(x), "SelfAttention.forward")
        expected_out, expected_weights = reference(x)
        what = f"SelfAttention({d_model}, d_k={d_k}, d_v={d_v}) on x {(b, length, d_model)}"
        w_q, w_k, w_v = (getattr(reference, n).weight.T for n in ("w_q", "w_k", "w_v"))
        mistakes = _self_attention_mistakes(x, w_q, w_k, w_v)
        assert_matches(weights, expected_weights, f"{what}: weights",
                       {k: w for k, (_, w) in mistakes.items()},
                       hint="Expected softmax(Q K^T, dim=-1) with Q = w_q(x), K = w_k(x).")
        assert_matches(out, expected_out, f"{what}: output", {k: o for k, (o, _) in mistakes.items()})
        # Gradients flow to every projection, as in the reference.
        out.square().sum().backward()
        expected_out.square().sum().backward()
        for name in ("w_q", "w_k", "w_v"):
            grad = getattr(mine, name).weight.grad
            if grad is None:
                raise AssertionError(f"{what}: no gradient reaches `{name}.weight`; build the "
                                     "output from the nn.Linear layers without detaching.")
            assert_matches(grad, getattr(reference, name).weight.grad,
                           f"{what}: gradient of `{name}.weight`")
