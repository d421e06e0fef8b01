"""The catalogue graded through the real path (`grade_class`): right both ways, mistakes named,
and a mistake costs points on its own exercise only (see quality/fairness.py)."""

from __future__ import annotations

import pytest

from quality.fairness import figures, grade_catalogue

from .conftest import GRADING_TIMEOUT


@pytest.fixture(scope="module")
def catalogue_graded(repo, tmp_path_factory):
    return grade_catalogue(repo, tmp_path_factory.mktemp("catalogue"), timeout=GRADING_TIMEOUT, workers=2)


def test_every_correct_variant_scores_full_marks(catalogue_graded):
    found, _ = catalogue_graded
    failed = [f"{o.case.exercise}/{o.case.name}: {o.score:g}/{o.max_score:g} {o.feedback}"
              for o in found if o.case.kind == "correct" and not o.full]
    assert not failed, "\n".join(failed)


def test_every_mistake_loses_points_and_is_named(catalogue_graded):
    found, _ = catalogue_graded
    missed = [f"{o.case.exercise}/{o.case.name}: {o.score:g}/{o.max_score:g} feedback {o.feedback!r} "
              f"lacks {o.case.words!r}" for o in found if o.case.kind == "mistake" and (o.full or not o.named)]
    assert not missed, "\n".join(missed)


def test_a_mistake_costs_points_on_its_own_exercise_only(catalogue_graded):
    _, collateral = catalogue_graded
    assert not collateral, "\n".join(collateral)


def test_figures_cover_the_whole_catalogue(catalogue_graded):
    found, _ = catalogue_graded
    numbers = figures(found)
    assert numbers["correct variants"] + numbers["mistakes"] == len(found) > 150
    assert numbers["correct variants at full marks (%)"] == 100.0
    assert numbers["mistakes caught (%)"] == 100.0


def test_the_outside_catalogue_is_graded_apart(catalogue_graded):
    """Code adapted from public implementations and bugs from their issue threads (a source address)."""
    found, _ = catalogue_graded
    own, theirs = figures(found, "own"), figures(found, "outside")
    assert theirs["correct variants"] >= 10 and theirs["mistakes"] >= 10
    assert own["correct variants"] + theirs["correct variants"] == figures(found)["correct variants"]
    assert theirs["correct variants at full marks (%)"] == 100.0
    assert theirs["mistakes caught (%)"] == 100.0
    assert theirs["mistakes named in feedback (%)"] >= 90.0
    assert all(o.case.source.startswith("https://") for o in found if o.case.origin == "outside")


def test_the_counts_quoted_in_the_benchmarks_are_those_graded(repo, catalogue_graded):
    """docs/benchmarks.md's fairness rows give each catalogue's correct answers, mistakes and exercises
    as graded here."""
    import re

    found, _ = catalogue_graded
    text = " ".join((repo.root / "docs" / "benchmarks.md").read_text().split())
    for origin, label in (("own", "own catalogue"), ("outside", "outside catalogue")):
        m = re.search(rf"\*\*grader fairness, {label}\*\* [^|]*?: (\d+) correct(?: variants)?, (\d+) mistakes, "
                      r"(\d+) exercises", text)
        assert m, f"no fairness row for the {label}"
        numbers = figures(found, origin)
        exercises = len({o.case.exercise for o in found if o.case.origin == origin})
        assert tuple(map(int, m.groups())) == (numbers["correct variants"], numbers["mistakes"], exercises)
