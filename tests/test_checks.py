"""Hidden checks, in-process: every correct variant passes, every mistake is caught and named.

Fast (no kernels); the sample class (test_grading.py) covers the real grading path.
"""

from __future__ import annotations

import re
import sys

import pytest
import torch

from quality.catalogue import ANSWERS, CHECKS, CORRECT, MISTAKES, OUTSIDE_CORRECT, OUTSIDE_MISTAKES
from quality.incheck import namespace, run_checks, student_cells

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

    def entries(catalogue: dict) -> list[tuple[str, str, str]]:
        return [(ex, name, entry if isinstance(entry, str) else entry[0])
                for ex, variants in catalogue.items() for name, entry in variants.items()]

    correct = entries(CORRECT) + entries(OUTSIDE_CORRECT)
    mistakes = entries(MISTAKES) + entries(OUTSIDE_MISTAKES)
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
    return [(exercise, author) for exercise, authors in ANSWERS.items() if exercise in CHECKS for author in authors]


@pytest.mark.parametrize(("exercise", "author"), _independent_cases())
def test_independent_answers_pass(exercise, author):
    """The independently written answers (catalogue/students/) are correct: each passes its checks, with
    the same author's earlier answers of the notebook defined before it, as in their notebook."""
    run_checks(exercise, namespace(student_cells(exercise, author)))


def test_a_catalogue_file_is_checked_on_its_own(repo):
    """`python -m quality.catalogue FILE...` prints each file's verdict and what the checks said; a
    mistake whose feedback lacks its words is reported wrong."""
    import dataclasses
    import subprocess

    from quality.catalogue import read
    from quality.incheck import outcome

    folder = repo.root / "catalogue" / "01_self_attention" / "softmax"
    files = [folder / "correct_amax.py", folder / "mistake_no_max_shift.py"]
    run = subprocess.run([sys.executable, "-m", "quality.catalogue", *map(str, files)], cwd=repo.root,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("ok") and lines[0].endswith(": passed")
    assert lines[1].startswith("ok") and "overflows" in lines[1]
    mistake = read(files[1])
    assert outcome(mistake)[0]
    assert not outcome(dataclasses.replace(mistake, fields={**mistake.fields, "feedback": "no such words"}))[0]
    assert not outcome(dataclasses.replace(mistake, kind="correct"))[0]


def test_a_catalogue_file_out_of_place_or_without_its_header_is_refused(tmp_path):
    from quality.catalogue import read

    where = tmp_path / "01_self_attention" / "softmax"
    where.mkdir(parents=True)
    (where / "mistake_x.py").write_text("# mistake: x\n# source: own\n\ndef softmax(x, dim=-1):\n    return x\n")
    with pytest.raises(ValueError, match="# feedback: ..."):
        read(where / "mistake_x.py", tmp_path)
    (where / "mistake_x.py").write_text("# mistake: x\n# feedback: y\n# source: own\ndef softmax(x, dim=-1):\n")
    with pytest.raises(ValueError, match="then a blank line"):
        read(where / "mistake_x.py", tmp_path)
    (where / "other.py").write_text("# correct: x\n\nx = 1\n")
    with pytest.raises(ValueError, match="correct_<name>.py"):
        read(where / "other.py", tmp_path)
    (where / "mistake_x.py").write_text("# mistake: x\n# feedback: y\n# source: own\n# why\n\n"
                                        "def softmax(x, dim=-1):\n")
    got = read(where / "mistake_x.py", tmp_path)
    assert (got.notebook, got.exercise, got.kind, got.name, got.words, got.origin, got.notes) == (
        "01_self_attention", "softmax", "mistake", "x", "y", "own", ("why",))
    assert got.code == "def softmax(x, dim=-1):\n"
