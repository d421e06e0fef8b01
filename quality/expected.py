"""Check a graded class against what it must score: ``autograder/sample_class.toml``.

The sample class's expectations are written once, in that file; this module compares them
with what an instructor reads after a run, ``OUT/grades.csv`` and ``OUT/exercises.csv``.
CI runs it on the output of ``make grade``; the tests run it on their own grading runs.

    python -m quality.expected out/sample_class
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

from transformer_course.grading.output.spreadsheet import read_rows
from transformer_course.instructors.deadlines import show
from transformer_course.layout import Repo


def load(path: Path) -> dict:
    """Students and their expectations: per assignment the score of every exercise, and
    optional ``status`` (default ``graded``), ``feedback`` (words the one-line feedback
    of that exercise must contain) and ``written`` (the answers in words: ``"awaiting"``, or
    the points they have)."""
    with open(path, "rb") as f:
        return tomllib.load(f)


def _read(path: Path) -> list[dict[str, str]]:
    return read_rows(path)  # each cell as written, before the spreadsheet-safe quote


def compare(out: Path, expected: dict, only_expected: bool = True) -> list[str]:
    """Every difference between the graded ``out`` and ``expected``, one line each ([] = all match).

    Args:
        out: a grading run's output folder (``grades.csv``, ``exercises.csv``).
        expected: :func:`load`'s result.
        only_expected: also report students graded in ``out`` that ``expected`` does not list.
    """
    grades = {(r["student_id"], r["assignment"]): r for r in _read(out / "grades.csv")}
    exercises: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
    for row in _read(out / "exercises.csv"):
        exercises.setdefault((row["student_id"], row["assignment"]), {})[row["exercise"]] = row
    problems = []
    for student, spec in expected.items():
        for assignment, scores in spec.items():
            if not assignment[:2].isdigit():
                continue
            row = grades.get((student, assignment))
            if row is None:
                problems.append(f"{student} {assignment}: no row in grades.csv")
                continue
            status = spec.get("status", {}).get(assignment, "graded")
            if row["status"] != status:
                problems.append(f"{student} {assignment}: status {row['status']!r}, expected {status!r}")
            got = exercises.get((student, assignment), {})
            for exercise, score in scores.items():
                if exercise not in got:
                    problems.append(f"{student} {assignment} {exercise}: no row in exercises.csv")
                elif float(got[exercise]["score"]) != float(score):
                    problems.append(f"{student} {assignment} {exercise}: scored {got[exercise]['score']}, "
                                    f"expected {score:g}; feedback: {got[exercise]['feedback']!r}")
            if extra := sorted(set(got) - set(scores)):
                problems.append(f"{student} {assignment}: exercises not in the expectations: {extra}")
            # Lateness (a run with autograder/deadlines.toml): the penalty expected, 0 where none is listed.
            penalty = float(spec.get("late", {}).get(assignment, 0))
            got_penalty = float(row.get("late_penalty") or 0)
            if penalty and not row.get("submitted_at"):
                problems.append(f"{student} {assignment}: no submission time in grades.csv; expected a late "
                                f"penalty of {penalty:g} (grade with --deadlines autograder/deadlines.toml)")
            elif got_penalty != penalty:
                when = show(row["submitted_at"]) if row.get("submitted_at") else "at no known time"
                problems.append(f"{student} {assignment}: late penalty {got_penalty:g}, expected {penalty:g} "
                                f"(handed in {when}, {row.get('late_by')} h late)")
            elif "final_score" in row and abs(float(row["final_score"]) - max(0.0, float(row["score"]) - penalty)) \
                    > 1e-6:
                problems.append(f"{student} {assignment}: final score {row['final_score']}, expected the score "
                                f"{row['score']} less {penalty:g}")
            # Answers in words (optional ``written``): "awaiting", or the points given (0 when unanswered).
            if assignment in spec.get("written", {}):
                want = spec["written"][assignment]
                have = (row.get("manual_status"), float(row.get("manual_score") or "nan"))
                if have != (("awaiting", have[1]) if want == "awaiting" else ("graded", float(want))):
                    problems.append(f"{student} {assignment}: written answers {row.get('manual_status')!r} "
                                    f"({row.get('manual_score')!r}), expected {want!r}")
            total = sum(float(r["score"]) for r in got.values())
            if float(row["score"]) != total:
                problems.append(f"{student} {assignment}: grades.csv says {row['score']}, "
                                f"its exercises sum to {total:g}")
        for exercise, words in spec.get("feedback", {}).items():
            messages = [rows[exercise]["feedback"] for (s, _), rows in exercises.items()
                        if s == student and exercise in rows]
            if not any(words in m for m in messages):
                problems.append(f"{student} {exercise}: feedback {messages} lacks {words!r}")
    flagged = set()
    if (out / "similarity" / "pairs.csv").is_file():
        flagged = {(r["exercise"], r["a"], r["b"])
                   for r in _read(out / "similarity" / "pairs.csv") if r["flagged"] == "1"}
    grouped = {}
    if (out / "similarity" / "students.csv").is_file():
        grouped = {r["student"]: r["source"] for r in _read(out / "similarity" / "students.csv") if r["grouped"] == "1"}
    for student, spec in expected.items():
        for exercise, other in spec.get("similar", {}).items():
            if not {(exercise, student, other), (exercise, other, student)} & flagged:
                problems.append(f"{student} {exercise}: the similarity report (similarity/pairs.csv) does not flag "
                                f"it with {other!r}")
            if grouped.get(student) != other:
                problems.append(f"{student}: the similarity report (similarity/students.csv) groups them with "
                                f"{grouped.get(student)!r}, not {other!r}")
    if only_expected:
        for student in sorted({s for s, _ in grades} - set(expected)):
            problems.append(f"{student}: graded but not in the expectations")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m quality.expected",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("out", help="a grading run's output folder, e.g. out/sample_class")
    parser.add_argument("--expected", default=None, help="default: autograder/sample_class.toml")
    args = parser.parse_args(argv)
    path = Path(args.expected) if args.expected else Repo().autograder / "sample_class.toml"
    expected = load(path)
    problems = compare(Path(args.out), expected)
    if problems:
        print(f"{len(problems)} difference(s) between {args.out} and {path}:", file=sys.stderr)
        for line in problems:
            print("  " + line, file=sys.stderr)
        return 1
    pairs = sum(1 for spec in expected.values() for a in spec if a[:2].isdigit())
    print(f"{args.out} matches {path}: {len(expected)} students, {pairs} notebooks, every score, status "
          "and feedback keyword")
    return 0


if __name__ == "__main__":
    sys.exit(main())
