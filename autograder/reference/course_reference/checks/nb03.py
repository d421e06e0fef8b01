"""Hidden checks for notebook 03 (multi-head attention)."""

from __future__ import annotations

from typing import Any

import torch

from .. import nb03_multi_head as ref
from ..nb02_scaled_dot_product import scaled_dot_product_attention as ref_sdpa
from . import (
    assert_matches,
    construct,
    copy_linear,
    generator,
    guarded,
    randn,
    reference_for,
    student_name,
    unpack_pair,
    upstream_from,
)

# These checks run in the grader's process, the student's code in the kernel (transformer_course.grading.judging.judge).
JUDGED = True

SECTION_SPLIT = "see section 1, 'Splitting into heads'"
SECTION_COMBINE = "see section 2, 'Putting the heads back together'"
SECTION_MHA = "see section 3, 'The module'"
PROJECTIONS = ["w_q", "w_k", "w_v", "w_o"]


upstream = upstream_from(ref)


def _split_mistakes(x: torch.Tensor, h: int) -> dict[str, torch.Tensor]:
    b, length, d = x.shape
    d_k = d // h
    return {
        "the heads are cut with view(B, h, L, d_k) and no transpose, which mixes positions into "
        f"heads; use view(B, L, h, d_k).transpose(1, 2) ({SECTION_SPLIT}).": x.reshape(b, h, length, d_k),
        "has shape (B, L, h, d_k): transpose(1, 2) so that heads come before positions, "
        f"(B, h, L, d_k) ({SECTION_SPLIT}).": x.reshape(b, length, h, d_k),
        "each head takes every h-th feature (view(B, L, d_k, h)); head i must take the contiguous "
        f"slice i*d_k:(i+1)*d_k of each vector ({SECTION_SPLIT}).":
            x.reshape(b, length, d_k, h).permute(0, 3, 1, 2),
    }


CASES = [  # (B, L, D, h, dtype): batch 1, length 1, one head and d_k = 1 included
    (2, 5, 12, 3, torch.float32),
    (1, 1, 8, 1, torch.float32),
    (3, 4, 8, 8, torch.float64),
    (2, 3, 6, 2, torch.float64),
]


def check_split_heads(ns: dict[str, Any]) -> None:
    split_heads = student_name(ns, "split_heads")
    gen = generator(301)
    for b, length, d, h, dtype in CASES:
        x = randn(b, length, d, gen=gen, dtype=dtype)
        assert_matches(split_heads(x, h), ref.split_heads(x, h),
                       f"split_heads(x {(b, length, d)}, num_heads={h})", _split_mistakes(x, h),
                       hint=f"Expected x.view(B, L, h, d_k).transpose(1, 2) ({SECTION_SPLIT}).")


def check_combine_heads(ns: dict[str, Any]) -> None:
    combine_heads = student_name(ns, "combine_heads")
    gen = generator(302)
    for b, length, d, h, dtype in CASES:
        heads = randn(b, h, length, d // h, gen=gen, dtype=dtype)
        expected = ref.combine_heads(heads)
        mistakes = {
            "reshapes (B, h, L, d_k) to (B, L, D) without transposing back, which mixes heads into "
            f"positions; transpose(1, 2) first ({SECTION_COMBINE}).": heads.reshape(b, length, d),
        }
        assert_matches(combine_heads(heads), expected, f"combine_heads(x {(b, h, length, d // h)})",
                       mistakes, hint=f"Expected x.transpose(1, 2).contiguous().view(B, L, D) ({SECTION_COMBINE}).")
        # The result must also be usable after a transpose made by the caller.
        assert_matches(combine_heads(heads.transpose(1, 2).contiguous().transpose(1, 2)), expected,
                       "combine_heads of a non-contiguous (B, h, L, d_k) tensor")


def _mha_mistakes(reference: ref.MultiHeadAttention, query, key, value, mask) -> dict:
    """(output, weights) of known mistakes with the reference's weights."""
    h = reference.num_heads
    q = ref.split_heads(reference.w_q(query), h)
    k = ref.split_heads(reference.w_k(key), h)
    v = ref.split_heads(reference.w_v(value), h)
    out, weights = ref_sdpa(q, k, v, mask=mask)
    combined = ref.combine_heads(out)
    single_out, single_w = ref_sdpa(reference.w_q(query), reference.w_k(key), reference.w_v(value),
                                    mask=None if mask is None else mask[:, 0])
    mistakes = {
        f"the output projection w_o is missing: apply self.w_o to the combined heads ({SECTION_MHA}).":
            (combined, weights),
        "returns the weights averaged over heads, (B, Lq, Lk); return every head's weights, "
        f"(B, h, Lq, Lk) ({SECTION_MHA}).": (reference.w_o(combined), weights.mean(dim=1)),
        "attends with one head of size d_model: split the projections into num_heads heads "
        f"before attention ({SECTION_MHA}).": (reference.w_o(single_out), single_w) if h > 1 else None,
        "uses w_k to project the values; each of query, key and value has its own projection.":
            (reference.w_o(ref.combine_heads(ref_sdpa(q, k, ref.split_heads(reference.w_k(value), h),
                                                      mask=mask)[0])), weights),
    }
    return {key_: val for key_, val in mistakes.items() if val is not None}


def check_MultiHeadAttention(ns: dict[str, Any]) -> None:  # noqa: N802 (the SPEC's class name)
    cls = student_name(ns, "MultiHeadAttention")
    gen = generator(303)
    try:
        cls(10, 3)
    except ValueError:
        pass
    except NotImplementedError:
        raise
    except Exception as exc:
        raise AssertionError(f"MultiHeadAttention(10, 3) raised {type(exc).__name__}; raise ValueError "
                             "when d_model is not divisible by num_heads.") from None
    else:
        raise AssertionError("MultiHeadAttention(10, 3) should raise ValueError: d_model=10 is not "
                             "divisible by num_heads=3.")
    cases = [  # (B, Lq, Lk, D, h, bias, mask kind, dtype)
        (2, 5, 5, 12, 3, True, "causal", torch.float32),
        (2, 4, 6, 8, 2, True, "padding", torch.float32),
        (1, 1, 1, 8, 1, True, None, torch.float32),
        (2, 3, 3, 8, 8, False, "padding", torch.float64),
    ]
    for b, lq, lk, d, h, bias, mask_kind, dtype in cases:
        with reference_for(ns, **upstream("split_heads", "combine_heads")):
            mine = construct(cls, "MultiHeadAttention", d, h, dropout=0.0, bias=bias)
        reference = ref.MultiHeadAttention(d, h, bias=bias)
        with torch.no_grad():
            for p in reference.parameters():
                p.copy_(randn(*p.shape, gen=gen) * 0.3)
        copy_linear(mine, reference, PROJECTIONS)
        mine.to(dtype).eval()
        reference.to(dtype).eval()
        query = randn(b, lq, d, gen=gen, dtype=dtype)
        key = query if lq == lk else randn(b, lk, d, gen=gen, dtype=dtype)
        value = key
        mask = None
        if mask_kind == "causal":
            mask = torch.ones(lq, lk, dtype=torch.bool).tril()[None, None]
        elif mask_kind == "padding":
            lengths = torch.tensor([lk, max(1, lk - 2)])[:b]
            mask = (torch.arange(lk) < lengths[:, None])[:, None, None, :]
        what = f"MultiHeadAttention({d}, {h}, bias={bias}) on query {(b, lq, d)}, key/value {(b, lk, d)}"
        what += f", {mask_kind} mask" if mask_kind else ""
        with reference_for(ns, **upstream("split_heads", "combine_heads")):
            out, weights = unpack_pair(guarded(mine, "MultiHeadAttention.forward")(query, key, value, mask=mask),
                                       "MultiHeadAttention.forward")
        expected_out, expected_weights = reference(query, key, value, mask=mask)
        mistakes = _mha_mistakes(reference, query, key, value, mask)
        assert_matches(weights, expected_weights, f"{what}: weights", {k: w for k, (_, w) in mistakes.items()})
        assert_matches(out, expected_out, f"{what}: output", {k: o for k, (o, _) in mistakes.items()})
        out.square().sum().backward()
        expected_out.square().sum().backward()
        for name in PROJECTIONS:
            grad = getattr(mine, name).weight.grad
            if grad is None:
                raise AssertionError(f"{what}: no gradient reaches `{name}.weight`.")
            assert_matches(grad, getattr(reference, name).weight.grad, f"{what}: gradient of `{name}.weight`")


def check_MultiHeadAttention_dropout(ns: dict[str, Any]) -> None:  # noqa: N802
    """Dropout on the attention weights in training mode, none in evaluation mode."""
    cls = student_name(ns, "MultiHeadAttention")
    gen = generator(304)
    with reference_for(ns, **upstream("split_heads", "combine_heads")):
        mine = construct(cls, "MultiHeadAttention", 8, 2, dropout=0.5)
        x = randn(2, 6, 8, gen=gen)
        forward = guarded(mine, "MultiHeadAttention.forward")
        mine.eval()
        first, second = forward(x, x, x)[0], forward(x, x, x)[0]
        if not torch.equal(first, second):
            raise AssertionError("in eval() mode two calls give different outputs: use dropout only "
                                 "in training mode (dropout_p = self.dropout if self.training else 0.0).")
        mine.train()
        torch.manual_seed(0)
        trained = [forward(x, x, x)[0] for _ in range(3)]
    if all(torch.allclose(t, first) for t in trained):
        raise AssertionError("with dropout=0.5 in train() mode the output never changes: pass the "
                             "dropout probability to the attention in training mode.")
