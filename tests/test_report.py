"""`transformer-course report OUT`: the class report built from a graded class (the sample
class of `make grade`, plus the solutions and the untouched stubs)."""

from __future__ import annotations

import re

import pytest

from transformer_course.cli import main
from transformer_course.instructors.report import build_report, mistake_of


def test_mistake_of_names_the_mistake_and_nothing_else():
    named = ("softmax(x, dim=1): softmax runs over the query axis; each query's weights must sum to 1 over "
             "the keys (dim=-1) (see section 2, 'Scaled dot-product attention').")
    assert mistake_of(named) == ("softmax runs over the query axis; each query's weights must sum to 1 over "
                                 "the keys (dim=-1)")
    assert mistake_of(named.replace("dim=1", "dim=0")) == mistake_of(named)  # the inputs do not split a mistake
    assert mistake_of("hidden tests: softmax(x) differs from the expected values: max abs error 0.3") is None
    assert mistake_of("not attempted (the stub raises NotImplementedError)") is None


@pytest.fixture(scope="module")
def report(graded):
    _, out = graded
    return build_report(out), graded[0]


def test_report_ranks_the_sample_class_mistakes_with_their_students(report):
    index, results = report
    page = index.read_text()
    table = page.split("<h2>Named mistakes", 1)[1].split("<h2>", 1)[0]
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td>(\d+)</td><td>([^<]*)</td></tr>", table)
    assert rows, "no named mistake listed"
    counts = [int(n) for _, _, n, _ in rows]
    assert counts == sorted(counts, reverse=True)
    # Every listed student did lose points on that exercise, and the count is the number of ids.
    for exercise, _, n, who in rows:
        ids = who.split(", ")
        assert len(ids) == int(n)
        for student in ids:
            lost = [e for (s, _), r in results.items() if s == student for e in r.exercises
                    if e.exercise == exercise and e.score < e.max_score]
            assert lost, (student, exercise)
    # dev's unstable softmax is named, with dev among its students.
    assert any(exercise == "softmax" and "dev" in who.split(", ") for exercise, _, _, who in rows)


def test_report_lists_who_was_not_graded_and_why_and_its_figures_exist(report):
    index, results = report
    page = index.read_text()
    not_graded = page.split("<h2>Not graded", 1)[1]
    for (student, assignment), r in results.items():
        if r.status != "graded":
            assert f"<td>{student}</td><td>{assignment}</td><td>{r.status}</td>" in not_graded
    for src in re.findall(r'<img src="([^"]+)"', page):
        assert (index.parent / src).stat().st_size > 10_000, src
    assert len(re.findall(r'<img src="', page)) == 2


def test_report_command_refuses_an_ungraded_folder(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "results.json" in capsys.readouterr().err


def test_report_shows_final_scores_with_the_raw_one_beside_a_late_penalty(report):
    """The figure plots the final score (after the late penalty), the table shows it with the raw score
    beside it, for the sample class's late student; an on-time notebook shows one number."""
    from transformer_course.instructors.report import _load, score_points

    index, results = report
    late = [(s, a, r) for (s, a), r in results.items() if r.late_penalty]
    assert late, "the sample class has a late notebook"
    page = index.read_text()
    table = page.split("<h2>Scores", 1)[1].split("<h2>", 1)[0]
    for student, assignment, r in late:  # the row of that student holds both
        row = next(line for line in table.split("<tr>") if line.startswith(f"<td>{student}</td>"))
        assert f"{r.final_score:g} / {r.max_score:g} (raw {r.score:g})" in row
        plotted = [(f, raw) for a, f, raw, _ in score_points(_load(index.parent.parent)) if a == assignment]
        assert (pytest.approx(100 * r.final_score / r.max_score), pytest.approx(100 * r.score / r.max_score)) in plotted
    on_time = next(r for r in results.values() if r.status == "graded" and not r.late_penalty and r.score)
    assert f"<td>{on_time.final_score:g} / {on_time.max_score:g}</td>" in table \
        or f"<td>{on_time.final_score:g} / {on_time.max_score:g}; written " in table  # and its answers in words
