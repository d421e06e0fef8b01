"""Every figure of two or more decimals that a notebook's text quotes is one its executed solution
printed, or one the text derives, which this test computes again. A retrain or a change of a cell that
moves a figure fails here until the text says what the run printed."""

from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "solutions").glob("0*.ipynb"))
FIGURE = re.compile(r"(?<![\w.])\d+\.\d{2,}(?![\w.])")
ARXIV = re.compile(r"^\d{4}\.\d{4,5}$")  # a paper's arXiv number, not a figure


def _softmax(*scores: float) -> list[float]:
    exps = [math.exp(s - max(scores)) for s in scores]
    return [e / sum(exps) for e in exps]


# Figures the text works out rather than reads off a run, each with what it is computed from.
DERIVED = {
    "01_self_attention": {"0.37": math.exp(-1),  # e^-1, the shifted exponent
                          "0.73": _softmax(1.0, 0.0)[0], "0.27": _softmax(1.0, 0.0)[1]},
    "02_scaled_dot_product": {"0.06": 1 / 16},  # a uniform row over 16 keys
    "05_positional_encoding": {"0.015": math.sqrt(2 / (8000 + 512))},  # Xavier's std for V=8000, D=512
    "07_training": {"0.98": 0.98},  # Adam's beta_2, the paper's section 5.3: a setting, not a result
}


def _text_and_output(notebook: str) -> tuple[str, str]:
    nb = nbformat.read(ROOT / "solutions" / f"{notebook}.ipynb", as_version=4)
    text = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    printed = []
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            printed.append(output.get("text", "") or output.get("data", {}).get("text/plain", ""))
    return text, "".join(printed)


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_figures_in_the_text_are_printed_by_the_run_or_derived(notebook):
    text, printed = _text_and_output(notebook)
    derived = DERIVED.get(notebook, {})
    unsupported = []
    for figure in sorted(set(FIGURE.findall(text))):
        if ARXIV.match(figure) or figure in printed:
            continue
        decimals = len(figure.split(".")[1])
        if figure not in derived or f"{derived[figure]:.{decimals}f}" != figure:
            unsupported.append(figure)
    assert not unsupported, f"{notebook}'s text quotes figures its run does not print: {unsupported}"


def test_the_derived_figures_are_still_quoted():
    """A derivation left in DERIVED after its sentence is gone would hide a future figure."""
    for notebook, figures in DERIVED.items():
        text, _ = _text_and_output(notebook)
        assert set(figures) <= set(FIGURE.findall(text)), (notebook, set(figures) - set(FIGURE.findall(text)))


def test_the_check_timings_quoted_are_those_of_the_recorded_run():
    """docs/benchmarks.md's `check` rows and docs/students.md's ranges are the figures of the run kept in
    docs/runs/ that benchmarks.md names (`make bench BENCH_FLAGS="--check-only --record FILE"`), and the
    server's idle time is the code's."""
    import json

    from transformer_course.grading.check_server import IDLE_S

    bench = " ".join((ROOT / "docs" / "benchmarks.md").read_text().split())
    named = re.findall(r"record in `(docs/runs/[^`]+/check\.json)`", bench)
    assert len(named) == 1, named
    rows = json.loads((ROOT / named[0]).read_text())["rows"]
    assert [r["notebook"] for r in rows] == NOTEBOOKS and all(r["same table"] for r in rows)
    for r in rows:
        ratio, cold = r["check"] / r["own cells"], r["from nothing"] / r["own cells"]
        assert (f"| {r['notebook']} | {r['check']:.2f} / {r['own cells']:.2f} s = {ratio:.2f}; from nothing "
                f"{r['from nothing']:.2f} s = {cold:.2f} | {'ok' if ratio <= 2 else '**over**'}") in bench, r
    students = " ".join((ROOT / "docs" / "students.md").read_text().split())
    warm, cold = [r["check"] for r in rows], [r["from nothing"] for r in rows]
    ratios = [r["check"] / r["own cells"] for r in rows]
    assert f"the first check takes {min(cold):.1f} to {max(cold):.1f} s" in students
    assert f"{min(warm):.1f} to {max(warm):.1f} s, {min(ratios):.1f} to {max(ratios):.1f} times" in students
    assert f"ends after {IDLE_S // 60} minutes without a check" in students
    assert f"It ends after {IDLE_S // 60} minutes without a check" in bench


def test_the_class_figures_quoted_are_those_of_the_recorded_run():
    """docs/benchmarks.md's class rows (a class graded by serial nbgrader and by ours) are the figures of
    the run kept in docs/runs/ that it names (`make bench BENCH_FLAGS="--class-only --record FILE"`)."""
    import json

    bench = " ".join((ROOT / "docs" / "benchmarks.md").read_text().split())
    named = re.findall(r"record in `(docs/runs/[^`]+/class\.json)`", bench)
    assert len(named) == 1, named
    g = json.loads((ROOT / named[0]).read_text())
    n, serial, ours = g["notebooks"], g["serial nbgrader autograde (s)"], g["transformer-course grade (s)"]
    assert f"**grading a class**: {g['students']} students x {n // g['students']} notebooks ({n} notebooks" in bench
    assert f"| {serial:,.1f} s ({serial / n:.2f} s per notebook) |" in bench
    assert f"| {ours:,.1f} s ({ours / n:.2f} s per notebook) |" in bench
    assert f"| speed-up | **{serial / ours:.2f}x** | >= 2.5x |" in bench
    assert f"| {g['identical']} / {g['compared']} | all |" in bench
