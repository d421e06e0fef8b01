"""Hidden checks for notebook 02 (scaled dot-product attention with masks)."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..nb02_scaled_dot_product import scaled_dot_product_attention as ref_sdpa
from . import assert_matches, generator, randn, record, student_name, tolerance, unpack_pair, within

# These checks run in the grader's process, the student's code in the kernel (transformer_course.grading.judging.judge).
JUDGED = True

SECTION_SCALE = "see section 1, 'Why scale by sqrt(d_k)'"
SECTION_MASK = "see section 2, 'Masks: True means attend'"


def _sdpa(ns: dict[str, Any]):
    return student_name(ns, "scaled_dot_product_attention")


def _plain(query, key, value, scale, dim=-1, mask=None, fill=float("-inf")):
    scores = query @ key.transpose(-2, -1) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, fill)
    weights = torch.softmax(scores, dim=dim)
    return weights @ value, weights


def _mistakes(query, key, value, mask=None) -> dict[str, dict[str, torch.Tensor]]:
    """Outputs and weights of known mistakes, keyed by the message that names them."""
    d_k, d_v, length_k = query.size(-1), value.size(-1), key.size(-2)
    cases = {
        "matches attention WITHOUT the 1/sqrt(d_k) scale; divide the scores by "
        f"sqrt(d_k) ({SECTION_SCALE}).": _plain(query, key, value, 1.0, mask=mask),
        "scales by 1/d_k instead of 1/sqrt(d_k) (the square root is missing; "
        f"{SECTION_SCALE}).": _plain(query, key, value, 1 / d_k, mask=mask),
        f"scales by 1/sqrt(Lk) (the sequence length) instead of 1/sqrt(d_k) ({SECTION_SCALE}).":
            _plain(query, key, value, 1 / math.sqrt(length_k), mask=mask)
            if length_k != d_k else None,
        "scales by 1/sqrt(d_v) instead of 1/sqrt(d_k); d_k is the size of queries and keys.":
            _plain(query, key, value, 1 / math.sqrt(d_v), mask=mask) if d_v != d_k else None,
        "softmax runs over the query axis (dim=-2); each query's weights must sum to 1 over "
        "the keys (dim=-1).": _plain(query, key, value, 1 / math.sqrt(d_k), dim=-2, mask=mask),
    }
    # Leading axes (batch, heads): `F.softmax(scores)` with no `dim` picks one itself (0 for 3-D
    # scores, 1 for 4-D), with only a deprecation warning.
    implicit = 0 if query.dim() == 3 else 1
    for axis in range(query.dim() - 2):
        role = "batch" if axis == 0 else "heads"
        why = " (softmax without dim= picks that axis by itself)" if axis == implicit else ""
        cases[f"softmax runs over axis {axis}, the {role} axis{why}; each query's weights must sum to 1 "
              "over the keys (dim=-1)."] = _plain(query, key, value, 1 / math.sqrt(d_k), dim=axis, mask=mask)
    if mask is not None:
        cases["the mask is inverted: True must mean 'may attend' (the convention of "
              f"F.scaled_dot_product_attention, not of nn.MultiheadAttention) ({SECTION_MASK})."
              ] = _plain(query, key, value, 1 / math.sqrt(d_k), mask=~mask)
        cases["the mask is ignored: blocked positions (mask False) must get weight 0 "
              f"({SECTION_MASK})."] = _plain(query, key, value, 1 / math.sqrt(d_k))
    return {k: v for k, v in cases.items() if v is not None}


def _compare(ns, query, key, value, mask, what):
    out, weights = unpack_pair(_sdpa(ns)(query, key, value, mask=mask),
                               "scaled_dot_product_attention")
    expected_out, expected_weights = ref_sdpa(query, key, value, mask=mask)
    mistakes = _mistakes(query, key, value, mask)
    assert_matches(weights, expected_weights, f"{what}: weights",
                   {k: w for k, (_, w) in mistakes.items()},
                   hint="Expected softmax(Q K^T / sqrt(d_k), dim=-1).")
    assert_matches(out, expected_out, f"{what}: output",
                   {k: o for k, (o, _) in mistakes.items()},
                   hint="Expected weights @ value.")
    return out, weights


def check_values(ns: dict[str, Any]) -> None:
    """No mask: several shapes and dtypes, and the gradient."""
    gen = generator(201)
    for q_shape, k_len, d_v, dtype in [
        ((2, 3, 8), 5, 6, torch.float32),
        ((1, 1, 4), 1, 4, torch.float32),
        ((2, 4, 3, 16), 7, 16, torch.float64),
        ((3, 2, 5, 4), 5, 2, torch.float32),
    ]:
        *lead, _, d_k = q_shape
        query = randn(*q_shape, gen=gen, dtype=dtype)
        key = randn(*lead, k_len, d_k, gen=gen, dtype=dtype)
        value = randn(*lead, k_len, d_v, gen=gen, dtype=dtype)
        _compare(ns, query, key, value, None,
                 f"attention(query {q_shape}, key {tuple(key.shape)}, value {tuple(value.shape)})")
    # Gradient with respect to every input matches the reference.
    query, key, value = (randn(2, 4, 8, gen=gen).requires_grad_() for _ in range(3))
    out, _ = unpack_pair(_sdpa(ns)(query, key, value), "scaled_dot_product_attention")
    out.square().sum().backward()
    ref_inputs = [t.detach().clone().requires_grad_() for t in (query, key, value)]
    ref_sdpa(*ref_inputs)[0].square().sum().backward()
    for name, mine, theirs in zip(("query", "key", "value"), (query, key, value), ref_inputs, strict=True):
        if mine.grad is None:
            raise AssertionError(f"no gradient reaches `{name}`; do not detach the inputs.")
        assert_matches(mine.grad, theirs.grad, f"gradient with respect to `{name}`")


def check_mask(ns: dict[str, Any]) -> None:
    """Boolean masks of every broadcast shape the course uses; blocked weights exactly 0."""
    gen = generator(202)
    b, h, lq, lk, d = 2, 3, 4, 5, 8
    query = randn(b, h, lq, d, gen=gen)
    key, value = randn(b, h, lk, d, gen=gen), randn(b, h, lk, d, gen=gen)
    lengths = torch.tensor([5, 3])
    masks = {
        "a padding mask (B, 1, 1, Lk)": (torch.arange(lk) < lengths[:, None])[:, None, None, :],
        "a causal-style mask (1, 1, Lq, Lk)": torch.ones(lq, lk, dtype=torch.bool).tril()[None, None],
        "a full mask (B, h, Lq, Lk)": torch.rand(b, h, lq, lk, generator=gen) > 0.3,
    }
    for label, mask in masks.items():
        mask = mask.clone()
        mask[..., 0] = True  # no fully blocked rows here: check_fully_masked covers them
        _, weights = _compare(ns, query, key, value, mask, f"attention with {label}")
        blocked = ~mask.expand_as(weights)
        if (weights.detach()[blocked] != 0).any():
            raise AssertionError(
                f"attention with {label}: blocked positions must get weight exactly 0, got up to "
                f"{weights.detach()[blocked].abs().max().item():.3g} ({SECTION_MASK})."
            )
    query64, key64, value64 = (t.double() for t in (query, key, value))
    _compare(ns, query64, key64, value64, masks["a full mask (B, h, Lq, Lk)"] | True,
             "attention (float64) with an all-True mask")


def check_fully_masked(ns: dict[str, Any]) -> None:
    """A fully blocked row: zero weights and output, and finite gradients (as the reference's)."""
    gen = generator(203)
    for dtype in (torch.float32, torch.float64):
        query, key, value = (randn(2, 3, 4, gen=gen, dtype=dtype).requires_grad_() for _ in range(3))
        mask = torch.ones(2, 3, 3, dtype=torch.bool)
        mask[0, 1] = False  # query 1 of batch 0 may attend to nothing
        mask[1, :, 2] = False
        out, weights = unpack_pair(_sdpa(ns)(query, key, value, mask=mask),
                                   "scaled_dot_product_attention")
        for name, tensor in (("weights", weights), ("output", out)):
            row = tensor.detach()[0, 1]
            if torch.isnan(row).any():
                raise AssertionError(
                    f"a fully blocked row gives NaN {name} ({dtype}): softmax over all -inf is "
                    f"NaN; set such rows to 0 ({SECTION_MASK})."
                )
            if (row != 0).any():
                raise AssertionError(
                    f"a fully blocked row must give 0 {name}, got values up to "
                    f"{row.abs().max().item():.3g} ({dtype}); a large negative fill such as -1e9 "
                    f"gives uniform weights there, not zeros ({SECTION_MASK})."
                )
            record(f"the {name} of a fully blocked row ({dtype})", row)
        # Training needs finite gradients: a NaN gradient reaches every parameter at the next step.
        # Checked on the student's own gradients (finite, and none for the query that sees nothing),
        # so that a mistake elsewhere (the scale, the softmax axis) is charged by the other tests only.
        out.square().sum().backward()
        for name, tensor in (("query", query), ("key", key), ("value", value)):
            if tensor.grad is None:
                raise AssertionError(f"no gradient reaches `{name}`; do not detach the inputs.")
            if not torch.isfinite(tensor.grad).all():
                raise AssertionError(
                    f"with a fully blocked row the gradient with respect to `{name}` has NaN "
                    f"({dtype}) although the outputs are fine: softmax over an all -inf row has "
                    "a NaN gradient, and a mask added to the scores (scores + 0/-inf) passes it "
                    "back; replace the blocked scores with masked_fill(~mask, -inf) or "
                    f"torch.where instead of adding -inf ({SECTION_MASK})."
                )
        blocked_query = query.grad[0, 1]
        if (blocked_query != 0).any():
            raise AssertionError(
                f"the gradient with respect to a query that may attend to nothing must be 0 ({dtype}): "
                f"its output is always 0, got values up to {blocked_query.abs().max().item():.3g} "
                f"({SECTION_MASK})."
            )
        record(f"the gradient of a fully blocked query ({dtype})", blocked_query, None)


def check_dropout(ns: dict[str, Any]) -> None:
    """dropout_p=0 changes nothing; dropout_p>0 drops weights and keeps the expected output."""
    gen = generator(204)
    query, key = randn(1, 3, 8, gen=gen), randn(1, 4, 8, gen=gen)
    value = randn(1, 4, 8, gen=gen) + 3.0
    sdpa = _sdpa(ns)
    # Compared with the student's own output without dropout, so that a mistake elsewhere
    # (scale, softmax axis) is charged by the other tests only.
    expected = unpack_pair(sdpa(query, key, value), "scaled_dot_product_attention")[0].detach()[0]
    no_dropout = unpack_pair(sdpa(query, key, value, dropout_p=0.0), "scaled_dot_product_attention")[0]
    assert_matches(no_dropout[0], expected, "output with dropout_p=0.0",
                   hint="dropout_p=0.0 must change nothing.", recorded=False)
    n = 4000
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    try:
        out, weights = unpack_pair(
            sdpa(query.expand(n, -1, -1), key.expand(n, -1, -1), value.expand(n, -1, -1),
                 dropout_p=0.5),
            "scaled_dot_product_attention")
    finally:
        torch.random.set_rng_state(state)
    if torch.allclose(out.detach(), expected.expand_as(out)):
        raise AssertionError("dropout_p=0.5 changed nothing: apply dropout to the attention "
                             "weights whenever dropout_p > 0 (e.g. F.dropout(weights, dropout_p)).")
    # The weights returned are those the output was computed with: after dropout.
    mixed = weights.detach().to(value.dtype) @ value.expand(n, -1, -1)
    if not within(mixed, out.detach(), tolerance(out.dtype)).all():
        raise AssertionError(
            "with dropout_p=0.5 the returned weights are not those the output was computed with: "
            "return the weights after dropout (output = weights @ value), see section 3, "
            "'Dropout on the weights'."
        )
    mean = out.detach().mean(dim=0)
    error = (mean - expected).abs().max().item()
    if error > 0.15:
        ratio = (mean.sum() / expected.sum()).item()
        hint = (" The mean output is about half the expected one: dropout must rescale the kept "
                "weights by 1/(1 - p), as F.dropout does." if 0.35 < ratio < 0.65 else "")
        raise AssertionError(
            f"with dropout_p=0.5 the output averaged over {n} runs is off by {error:.3g}; "
            f"dropout must keep the expected output unchanged.{hint}"
        )
