"""Hidden checks, in-process: every correct variant passes, every mistake is caught and named.

Fast (no kernels); the sample class (test_grading.py) covers the real grading path.
"""

from __future__ import annotations

import importlib
import math
import re
import sys
import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "autograder" / "reference"))

from transformer_course.quality.catalogue import CHECKS, CORRECT, MISTAKES  # noqa: E402


def namespace(code: str) -> dict:
    """A notebook-like namespace: the imports of the notebook, then the answer cell."""
    ns = {"torch": torch, "math": math, "F": F, "nn": nn}
    # What the notebooks import from course_blocks, and earlier exercises of the same notebook.
    for module in ("nb02_scaled_dot_product", "nb03_multi_head", "nb04_masking", "nb05_positional_encoding",
                   "nb06_transformer", "nb07_training", "nb08_modern_decoder"):
        ref = importlib.import_module(f"course_reference.{module}")
        ns.update({k: v for k, v in vars(ref).items() if not k.startswith("_") and callable(v)})
    # An answer cell may import more of the earlier blocks itself, as students do.
    blocks = types.ModuleType("course_blocks")
    vars(blocks).update({k: v for k, v in ns.items() if callable(v)})
    saved = sys.modules.get("course_blocks")
    sys.modules["course_blocks"] = blocks
    try:
        exec(compile(code, "<answer cell>", "exec"), ns)
    finally:
        if saved is None:
            sys.modules.pop("course_blocks", None)
        else:
            sys.modules["course_blocks"] = saved
    return ns


def run_checks(exercise: str, ns: dict) -> None:
    module, names = CHECKS[exercise]
    checks = importlib.import_module(f"course_reference.checks.{module}")
    for name in names:
        getattr(checks, name)(ns)


CORRECT_CASES = [(ex, name) for ex, variants in CORRECT.items() for name in variants]
MISTAKE_CASES = [(ex, name) for ex, variants in MISTAKES.items() for name in variants]


@pytest.mark.parametrize(("exercise", "variant"), CORRECT_CASES)
def test_correct_variant_passes(exercise, variant):
    run_checks(exercise, namespace(CORRECT[exercise][variant]))


@pytest.mark.parametrize(("exercise", "mistake"), MISTAKE_CASES)
def test_mistake_is_caught_and_named(exercise, mistake):
    code, words = MISTAKES[exercise][mistake]
    with pytest.raises(AssertionError) as caught:
        run_checks(exercise, namespace(code))
    assert words in str(caught.value), f"feedback does not name the mistake: {caught.value}"
    assert "\n" not in str(caught.value)


def test_downstream_exercise_is_graded_with_reference_helpers():
    """A broken softmax costs the softmax points only: self_attention is checked with the reference."""
    broken = ("def softmax(x, dim=-1):\n    return x\n\n"
              "def attention_scores(q, k):\n    raise NotImplementedError\n")
    ns = namespace(broken + CORRECT["self_attention"]["own_helpers"])
    run_checks("self_attention", ns)
    assert ns["softmax"](torch.ones(2)).tolist() == [1.0, 1.0], "the student's own names are restored"


def test_reseeding_does_not_change_the_test_inputs():
    ns = namespace("seen = []\ndef attention_scores(query, key):\n    seen.append(query.clone())\n"
                   "    return query @ key.transpose(-2, -1)")
    run_checks("attention_scores", ns)
    first = ns["seen"][0]
    ns["seen"].clear()
    torch.manual_seed(1234)
    run_checks("attention_scores", ns)
    assert torch.equal(first, ns["seen"][0])


def test_missing_name_is_reported_clearly():
    with pytest.raises(AssertionError, match="`softmax` is not defined"):
        run_checks("softmax", {})


def test_feedback_locates_differences_that_match_no_known_mistake():
    """The README's example: a table wrong in its cos columns only."""
    from course_reference.checks import locate
    from course_reference.nb05_positional_encoding import sinusoidal_positional_encoding

    table = sinusoidal_positional_encoding(6, 8)
    wrong = table.clone()
    wrong[:, 1::2] = wrong[:, 1::2] * 0.5 + 0.1  # an exponent bug in the cos columns only
    assert locate(wrong, table) == "only indices 1, 3, 5, 7 of the last axis (size 8) differ"
    assert "times 2" in locate(table * 2, table)
    assert "transpose" in locate(table[:6, :6].T, table[:6, :6])
    assert "plus 0.5" in locate(table + 0.5, table)


def test_diagnoses_do_not_fire_where_they_do_not_hold():
    """A factor of 1 and an offset of 0 are no diagnosis (a sum rounded in another order differs
    from the expected values by a few units in the last place, nearly uniformly)."""
    from course_reference.checks import locate

    gen = torch.Generator().manual_seed(0)
    expected = torch.randn(8, 24, generator=gen) * 50
    rounded = expected * (1 + 3e-7 * torch.randn(8, 24, generator=gen))  # rounding-sized, relative
    shifted = expected + 1e-7 * torch.randn(8, 24, generator=gen)
    for got in (rounded, shifted):
        found = locate(got, expected)
        assert "times" not in found and "plus" not in found, found


def test_one_comparison_rule_accepts_rounding_of_large_sums_and_rejects_mistakes():
    """float32 gradients of the reference GroupedQueryAttention against float64 (measured: up to
    1.3e-6 of the largest entry) pass; a wrong scale, a small offset or one wrong entry does not."""
    import copy

    from course_reference import nb08_modern_decoder as ref08
    from course_reference.checks import tolerance, within

    gen = torch.Generator().manual_seed(805)
    model = ref08.GroupedQueryAttention(16, 4, 2)
    for p in model.parameters():
        p.data = torch.randn(p.shape, generator=gen, dtype=torch.float64).float()
    x = torch.randn(2, 5, 16, generator=gen, dtype=torch.float64)
    weights = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(8050), dtype=torch.float64)
    grads = {}
    for dtype in (torch.float32, torch.float64):
        copied = copy.deepcopy(model).to(dtype)
        (copied(x.to(dtype))[0] * weights.to(dtype)).sum().backward()
        grads[dtype] = copied.w_k.weight.grad
    got, exact = grads[torch.float32], grads[torch.float64].float()
    assert not torch.allclose(got, exact, rtol=1e-4, atol=1e-5)  # the old rule: a correct answer failed
    tol = tolerance(torch.float32)
    assert within(got, exact, tol).all()
    one_wrong = exact.clone()
    one_wrong[0, 0] += 1e-2 * exact.abs().max()
    for wrong in (exact * 1.001, exact + 1e-3 * exact.abs().max(), one_wrong):
        assert not within(wrong, exact, tol).all()


def _verdicts_and_margin(cases: list[tuple[str, str, str]]) -> tuple[dict, float]:
    """Each case's verdict (passed, or the failure's first words), and the largest share of the
    allowed error a passing comparison used (``|got - expected|`` over what :func:`within` allows)."""
    import course_reference.checks as checks

    rule, worst = checks.within, [0.0]

    def measured(got, expected, tol):
        close = rule(got, expected, tol)
        if close.all() and got.numel():
            g, e = got.detach().double(), expected.detach().double()
            used = torch.where(g == e, torch.zeros_like(g), (g - e).abs()) / checks.allowance(expected, tol)
            worst[0] = max(worst[0], used.nan_to_num(0.0).max().item())
        return close

    verdicts = {}
    checks.within = measured
    try:
        for exercise, name, code in cases:
            try:
                run_checks(exercise, namespace(code))
                verdicts[(exercise, name)] = "passed"
            except AssertionError as exc:  # the message's words, not its numbers (errors differ in the last place)
                verdicts[(exercise, name)] = " ".join(re.sub(r"[-+0-9.e]+", "#", str(exc)).split()[:12])
    finally:
        checks.within = rule
    return verdicts, worst[0]


def test_verdicts_hold_under_any_threads_and_load():
    """Every correct variant and every mistake of both catalogues (own and outside), checked with
    1, 2 and 4 torch threads, the last while two processes keep every core busy: the same verdicts,
    every correct answer passing, and with a margin: no passing comparison uses more than half of
    the error the rule allows, so that a machine summing in another order cannot flip it."""
    import subprocess

    from transformer_course.quality import outside

    def entries(catalogue: dict) -> list[tuple[str, str, str]]:
        return [(ex, name, entry if isinstance(entry, str) else entry[0])
                for ex, variants in catalogue.items() for name, entry in variants.items()]

    correct = entries(CORRECT) + entries(outside.CORRECT)
    mistakes = entries(MISTAKES) + entries(outside.MISTAKES)
    saved = torch.get_num_threads()
    runs = {}
    try:
        for threads in (1, 2, 4):
            burners = ([subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
                       if threads == 4 else [])
            torch.set_num_threads(threads)
            try:
                runs[threads] = (_verdicts_and_margin(correct), _verdicts_and_margin(mistakes)[0])
            finally:
                for burner in burners:
                    burner.kill()
    finally:
        torch.set_num_threads(saved)
    for threads, ((passed, margin), caught) in runs.items():
        failed = {case: v for case, v in passed.items() if v != "passed"}
        assert not failed, f"{threads} threads: correct answers failed: {failed}"
        assert margin < 0.5, f"{threads} threads: a correct answer used {margin:.0%} of the allowed error"
        assert "passed" not in caught.values(), f"{threads} threads: a mistake passed"
        assert caught == runs[1][1], f"{threads} threads: other verdicts than with 1 thread"


def test_section_pointers_in_feedback_name_real_headings(repo):
    """Every "see section N, 'Title'" of the checks is a heading "## N. Title" of its notebook."""
    import re

    def norm(text: str) -> str:
        return re.sub(r"[`$\\{}()]", "", text).lower().strip()

    problems = []
    for module in sorted((repo.reference / "course_reference" / "checks").glob("nb[0-9][0-9].py")):
        assignment = next(a for a in repo.assignments() if a.name.startswith(module.stem[2:4]))
        headings = {(int(n), norm(t)) for n, t in re.findall(r"^# ## (\d+)\. (.+)$", assignment.source_file.read_text(),
                                                             re.MULTILINE)}
        for n, title in re.findall(r"see section (\d+), '([^']+)'", module.read_text()):
            if (int(n), norm(title)) not in headings:
                problems.append(f"{module.name}: section {n}, {title!r} is not a heading of {assignment.name}")
    assert not problems, "\n".join(problems)


def _independent_cases() -> list[tuple[str, str]]:
    from transformer_course.quality.independent import ANSWERS

    return [(exercise, author) for exercise, authors in ANSWERS.items() if exercise in CHECKS for author in authors]


@pytest.mark.parametrize(("exercise", "author"), _independent_cases())
def test_independent_answers_pass(exercise, author):
    """The independently written answers (quality/independent.py) are correct: each passes its checks, with
    the same author's earlier answers of the notebook defined before it, as in their notebook."""
    from transformer_course.quality.independent import ANSWERS

    earlier = [by[author] for name, by in ANSWERS.items() if author in by]
    cells = earlier[:list(ANSWERS).index(exercise) + 1]
    run_checks(exercise, namespace("\n\n".join(cells)))
