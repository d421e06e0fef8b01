"""The catalogue of answers, read from ``catalogue/``: one file per answer cell.

Layout (CONTRIBUTING.md, section 4):

- ``catalogue/<notebook>/<exercise>/correct_<name>.py``: a correct answer, in a style of its own; it must
  pass that exercise's hidden checks.
- ``catalogue/<notebook>/<exercise>/mistake_<name>.py``: a real mistake; the checks must fail it with a
  message containing its ``feedback:`` words.
- ``catalogue/students/<student>/<notebook>/<exercise>.py``: the answers of students who filled in the
  notebooks independently (the honest class of the similarity report).

Each file is an answer cell under a header of comment lines, then a blank line::

    # mistake: no max shift
    # feedback: overflows
    # source: own
    # (any further comment lines: why this case is here)

``source:`` is ``own`` (written next to the checks) or the public implementation or issue thread the
answer is adapted from (the outside catalogue: the grader was not tuned on these). The files use the
notebook's imports (:data:`IMPORTS`) and the names an answer cell sees in its notebook without
importing them; ``catalogue/ruff.toml`` declares those names for the linter.

Used by tests/test_checks.py (in-process), tests/test_fairness.py and ``make bench`` (through the
real grading path, see :mod:`quality.fairness`). ``python -m quality.catalogue FILE...`` checks files
in-process and prints each verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "catalogue"
# Students import what they use; the catalogue's code assumes these names.
IMPORTS = "import math\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
KINDS = ("correct", "mistake", "student")
FIELDS = {"correct": ("source",), "mistake": ("feedback", "source"), "student": ()}
_FIELD = re.compile(r"# (\w+): (.*)")

# Which hidden checks grade an exercise: check_<exercise> in the notebook's module, except these.
_CHECKS_OTHER = {
    "scaled_dot_product_attention": ["check_values", "check_mask", "check_fully_masked", "check_dropout"],
    "MultiHeadAttention": ["check_MultiHeadAttention", "check_MultiHeadAttention_dropout"],
    # Not an exercise: the property test after make_padding_mask (a padded sentence gives what it gives
    # alone). Its folder holds mistakes only; every correct padding mask must pass it too.
    "make_padding_mask_no_effect": ["check_padding_has_no_effect"],
}
_ALSO_CORRECT = {"make_padding_mask_no_effect": "make_padding_mask"}


@dataclass(frozen=True)
class Variant:
    """One answer cell of the catalogue."""

    path: Path
    notebook: str  # "01_self_attention"
    exercise: str  # the exercise's name (SPEC), or a student's folder's file stem
    kind: str  # "correct" | "mistake" | "student"
    name: str  # the file's name after ``correct_``/``mistake_``; a student's name
    code: str
    fields: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def words(self) -> str:
        """For a mistake: what its feedback must contain."""
        return self.fields.get("feedback", "")

    @property
    def source(self) -> str:
        return self.fields.get("source", "")

    @property
    def origin(self) -> str:
        """"own" (written next to the checks) or "outside" (adapted from code written elsewhere)."""
        return "own" if self.source in ("own", "") else "outside"


def read(path: Path, folder: Path = FOLDER) -> Variant:
    """The variant in ``path`` (its kind and place from its path under ``folder``, its fields from the header).

    Raises:
        ValueError: the path is not where a variant goes, or the header lacks a field its kind needs.
    """
    path = Path(path).resolve()
    parts = path.relative_to(folder.resolve()).parts if path.is_relative_to(folder.resolve()) else ()
    if parts and parts[0] == "students" and len(parts) == 4:
        kind, name, notebook, exercise = "student", parts[1], parts[2], Path(parts[3]).stem
    elif len(parts) == 3 and (m := re.fullmatch(r"(correct|mistake)_(\w+)\.py", parts[2])):
        kind, name, notebook, exercise = m[1], m[2], parts[0], parts[1]
    else:
        raise ValueError(f"{path}: expected catalogue/<notebook>/<exercise>/correct_<name>.py or mistake_<name>.py, "
                         "or catalogue/students/<student>/<notebook>/<exercise>.py")
    lines = path.read_text().split("\n")
    head = []
    while lines and lines[0].startswith("#"):
        head.append(lines.pop(0))
    if not head or not lines or lines[0] != "":
        raise ValueError(f"{path}: expected a header of '# key: value' comment lines, then a blank line, then the code")
    fields, notes = {}, []
    for line in head:
        m = _FIELD.fullmatch(line)
        if m and m[1] in (*KINDS, *FIELDS["mistake"]) and m[1] not in fields:
            fields[m[1]] = m[2]
        else:
            notes.append(line[1:].strip())
    missing = [k for k in (kind, *FIELDS[kind]) if not fields.get(k)]
    if missing:
        raise ValueError(f"{path}: the header needs {', '.join(f'# {k}: ...' for k in missing)}")
    code = "\n".join(lines[1:]).rstrip("\n") + "\n"
    return Variant(path, notebook, exercise, kind, name, code, fields, tuple(notes))


@cache
def variants() -> tuple[Variant, ...]:
    """Every file of the catalogue, by notebook, then exercise in notebook order (a student's answers
    in the order of their notebook), then file name."""
    from transformer_course.layout import Repo

    order = {ex: i for i, ex in enumerate(e for a in Repo(ROOT).assignments() for e in a.exercises)}
    found = [read(p) for p in FOLDER.rglob("*.py")]
    return tuple(sorted(found, key=lambda v: (v.kind == "student", v.notebook, order.get(v.exercise, len(order)),
                                              v.exercise, v.name)))


def _by_exercise(kind: str, origin: str) -> dict[str, dict[str, Variant]]:
    found: dict[str, dict[str, Variant]] = {}
    for v in variants():
        if v.kind == kind and v.origin == origin:
            found.setdefault(v.exercise, {})[v.name] = v
    return found


def _checks() -> dict[str, tuple[str, list[str]]]:
    found = {}
    for v in variants():
        if v.kind != "student":
            names = _CHECKS_OTHER.get(v.exercise, [f"check_{v.exercise}"])
            found.setdefault(v.exercise, (f"nb{v.notebook[:2]}", names))
    return found


# The views the tests and benchmarks use. exercise -> {name: code}
CORRECT = {ex: {n: v.code for n, v in by.items()} for ex, by in _by_exercise("correct", "own").items()}
for _ex, _of in _ALSO_CORRECT.items():
    CORRECT[_ex] = dict(CORRECT[_of])
# exercise -> {name: (code, words the feedback must contain)}
MISTAKES = {ex: {n: (v.code, v.words) for n, v in by.items()} for ex, by in _by_exercise("mistake", "own").items()}
# The outside catalogue. exercise -> {name: (code, source)} and {name: (code, source, words)}
OUTSIDE_CORRECT = {ex: {n: (v.code, v.source) for n, v in by.items()}
                   for ex, by in _by_exercise("correct", "outside").items()}
OUTSIDE_MISTAKES = {ex: {n: (v.code, v.source, v.words) for n, v in by.items()}
                    for ex, by in _by_exercise("mistake", "outside").items()}
# The students' answers. exercise -> {student: code}, exercises in notebook order.
ANSWERS: dict[str, dict[str, str]] = {}
for _v in variants():
    if _v.kind == "student":
        ANSWERS.setdefault(_v.exercise, {})[_v.name] = _v.code
# exercise -> (module of autograder/reference/course_reference/checks, check functions)
CHECKS = _checks()


def main(argv: list[str] | None = None) -> int:
    """Check catalogue files in-process (no kernel) and print each verdict; exit 1 where one is wrong."""
    import argparse

    from quality.incheck import outcome

    parser = argparse.ArgumentParser(prog="python -m quality.catalogue", description=main.__doc__)
    parser.add_argument("files", nargs="+", type=Path, help="files under catalogue/ (a folder: every file in it)")
    args = parser.parse_args(argv)
    paths = [p for f in args.files for p in (sorted(f.rglob("*.py")) if f.is_dir() else [f])]
    wrong = 0
    for path in paths:
        ok, message = outcome(read(path))
        wrong += not ok
        print(f"{'ok   ' if ok else 'WRONG'} {path}: {message}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
