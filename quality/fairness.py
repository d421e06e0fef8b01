"""The catalogue through the real grading path: is the grader right both ways?

Every correct variant and every mistake of the catalogue (:mod:`quality.catalogue`) becomes an answer cell in a
solution notebook, graded by :func:`~.batch.grade_class` like a student's. To keep the
number of notebooks small, one notebook carries one case per exercise of its assignment
(round ``k`` takes each exercise's ``k``-th case): so it also checks that a mistake costs
points on its own exercise only, since every other exercise of that notebook must still
score full marks. The code cells after a notebook's last test cell (the closing demonstrations:
attention maps, timings, a small model trained) are left out of the catalogue's notebooks: cells run
in order, so nothing after the last test cell can change a score, and they were about a third of the
catalogue's kernel time.

Two catalogues: the own one (``source: own``, written next to the checks) and the one from
outside (a ``source:`` address, adapted from public implementations and their issue threads). Figures
(:func:`figures`), for each apart: the share of correct variants at full marks (target 100%), of
mistakes that lose points (100%), and of mistakes whose feedback names or locates them (>= 90%).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat

from quality.catalogue import CORRECT, IMPORTS, MISTAKES, OUTSIDE_CORRECT, OUTSIDE_MISTAKES
from transformer_course.grading.notebook.grade import SubmissionResult
from transformer_course.grading.run.batch import grade_class
from transformer_course.layout import Repo


@dataclass(frozen=True)
class Case:
    assignment: str
    exercise: str
    kind: str  # "correct" | "mistake"
    name: str
    code: str
    words: str = ""  # for a mistake: what its feedback must contain
    origin: str = "own"  # "own" or "outside" (the file's ``source:``)
    source: str = ""  # for an outside case: the implementation or issue it comes from


@dataclass(frozen=True)
class Outcome:
    case: Case
    score: float
    max_score: float
    feedback: str

    @property
    def full(self) -> bool:
        return self.score >= self.max_score

    @property
    def named(self) -> bool:
        return bool(self.case.words) and self.case.words in self.feedback


def cases(repo: Repo) -> dict[str, list[list[Case]]]:
    """assignment -> exercises -> that exercise's cases, for the exercises the catalogue covers."""
    found: dict[str, list[list[Case]]] = {}
    for assignment in repo.assignments():
        for exercise in assignment.exercises:
            own = [Case(assignment.name, exercise, "correct", name, code)
                   for name, code in CORRECT.get(exercise, {}).items()]
            own += [Case(assignment.name, exercise, "mistake", name, code, words)
                    for name, (code, words) in MISTAKES.get(exercise, {}).items()]
            own += [Case(assignment.name, exercise, "correct", name, code, origin="outside", source=source)
                    for name, (code, source) in OUTSIDE_CORRECT.get(exercise, {}).items()]
            own += [Case(assignment.name, exercise, "mistake", name, code, words, "outside", source)
                    for name, (code, source, words) in OUTSIDE_MISTAKES.get(exercise, {}).items()]
            if own:
                found.setdefault(assignment.name, []).append(own)
    return found


def write_class(repo: Repo, submitted: Path) -> dict[tuple[str, str], list[Case]]:
    """Write the packed case notebooks as a class (student ``cat_NN``) and say which cases each holds."""
    packed: dict[tuple[str, str], list[Case]] = {}
    for name, per_exercise in cases(repo).items():
        assignment = repo.assignment(name)
        solution = repo.solutions / f"{assignment.notebook}.ipynb"
        for k in range(max(len(c) for c in per_exercise)):
            chosen = [c[k] for c in per_exercise if k < len(c)]
            nb = nbformat.read(solution, as_version=4)
            for case in chosen:
                cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == case.exercise)
                # The case's code follows the solution's cell, so it replaces the exercise while the
                # solution's own helpers (07's merge_pair, which apply_bpe also uses) stay defined:
                # the other exercises are the solution's, helpers included.
                cell.source = cell.source + "\n\n" + IMPORTS + case.code
            nb.cells = _without_closing_demos(nb.cells)
            student = f"cat_{k:02d}"
            folder = submitted / student / name
            folder.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, folder / f"{assignment.notebook}.ipynb")
            packed[(student, name)] = chosen
    return packed


def _without_closing_demos(cells: list) -> list:
    """The cells up to the last test cell, and the text cells after it (its written questions)."""
    last = max(i for i, c in enumerate(cells)
               if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade"))
    return [c for i, c in enumerate(cells) if i <= last or c.cell_type != "code"]


def outcomes(packed: dict[tuple[str, str], list[Case]], results: list[SubmissionResult]
             ) -> tuple[list[Outcome], list[str]]:
    """Per case, its exercise's score and feedback; and the exercises without a case that lost
    points (each one a mistake charged to the wrong exercise, or a grader fault)."""
    by_key = {(r.student_id, r.assignment): r for r in results}
    found, collateral = [], []
    for key, chosen in packed.items():
        result = by_key[key]
        per_exercise = {e.exercise: e for e in result.exercises}
        covered = {c.exercise for c in chosen}
        for case in chosen:
            e = per_exercise[case.exercise]
            found.append(Outcome(case, e.score, e.max_score, e.feedback))
        wrong = [c for c in chosen if c.kind == "mistake"]
        for e in result.exercises:
            if e.exercise not in covered and e.score < e.max_score:
                collateral.append(f"{key[0]} {key[1]} {e.exercise} lost points next to "
                                  f"{[c.name for c in wrong]}: {e.feedback}")
    return found, collateral


def figures(found: list[Outcome], origin: str | None = None) -> dict[str, float]:
    """The figures of the cases of ``origin`` ("own", "outside"; None: all)."""
    found = [o for o in found if origin is None or o.case.origin == origin]
    correct = [o for o in found if o.case.kind == "correct"]
    mistakes = [o for o in found if o.case.kind == "mistake"]
    return {
        "correct variants": len(correct),
        "correct variants at full marks (%)": 100.0 * sum(o.full for o in correct) / max(len(correct), 1),
        "mistakes": len(mistakes),
        "mistakes caught (%)": 100.0 * sum(not o.full for o in mistakes) / max(len(mistakes), 1),
        "mistakes named in feedback (%)": 100.0 * sum(o.named for o in mistakes) / max(len(mistakes), 1),
    }


def grade_catalogue(repo: Repo, work: Path, timeout: int = 20, workers: int | None = None
                    ) -> tuple[list[Outcome], list[str]]:
    """Write and grade the catalogue class under ``work``; see :func:`outcomes`."""
    packed = write_class(repo, work / "submitted")
    results = grade_class(work / "submitted", work / "out", repo, timeout=timeout, progress=False,
                          workers=workers)
    results = [r for r in results if (r.student_id, r.assignment) in packed]
    return outcomes(packed, results)
