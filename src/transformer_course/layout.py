"""Where things live in the repository, and what each assignment contains."""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import nbformat

SOURCE_SUFFIX = ".source.py"
# The module shipped beside notebooks that build on earlier ones: the reference code of
# the earlier notebooks only (SPEC, "Later notebooks may use earlier building blocks").
BLOCKS_MODULE = "course_blocks.py"
COURSE_ID = "transformer-course"
# Environment variables read by notebook 07: which training configuration to run, and
# whether the grader is running it (then it skips training; grading never trains).
TRAIN_CONFIG_ENV = "COURSE_TRAIN_CONFIG"
GRADING_ENV = "COURSE_GRADING"
# A submission the grader itself failed on (an nbgrader error, a bug of ours): not the
# student's zero. Such rows are never recorded as graded, and are listed in ERRORS_LOG.
GRADER_ERROR = "grader-error"
ERRORS_LOG = "grader-errors.log"
# Where the Colab badges and setup cells fetch from (also [project.urls] in pyproject.toml).
GITHUB_REPO = "transformer-course/transformer-course"


def read_source(path: Path) -> nbformat.NotebookNode:
    """The jupytext source at ``path`` as a notebook (a copy the caller may change). Parsed once per
    version of the file in a process: a class run reads each source several times (the grader's set-up,
    the class gradebook's, the hand-in recogniser), and parsing one costs about a second.

    Raises:
        OSError: when the file cannot be read.
    """
    stat = path.stat()
    return copy.deepcopy(_parsed_source(str(path.resolve()), stat.st_mtime_ns, stat.st_size))


@lru_cache(maxsize=64)
def _parsed_source(path: str, _mtime_ns: int, _size: int) -> nbformat.NotebookNode:
    import jupytext  # slow to import: only where a source is read

    return jupytext.read(path)


def find_root() -> Path:
    """The repository root: $TRANSFORMER_COURSE_ROOT, else the first parent of the working
    directory that has ``autograder/source``, else the checkout this package was installed from.

    Raises:
        FileNotFoundError: when no root can be found.
    """
    env = os.environ.get("TRANSFORMER_COURSE_ROOT")
    candidates = [Path(env)] if env else []
    cwd = Path.cwd().resolve()
    candidates += [cwd, *cwd.parents, Path(__file__).resolve().parents[2]]
    for path in candidates:
        if (path / "autograder" / "source").is_dir():
            return path
    raise FileNotFoundError(
        "cannot find the course repository (a folder with autograder/source/); run from inside "
        "the checkout or set TRANSFORMER_COURSE_ROOT"
    )


@dataclass(frozen=True)
class Repo:
    root: Path = field(default_factory=find_root)

    @property
    def autograder(self) -> Path:
        return self.root / "autograder"

    @property
    def source(self) -> Path:
        return self.autograder / "source"

    @property
    def reference(self) -> Path:
        """Put on PYTHONPATH for hidden tests only; never shipped to students."""
        return self.autograder / "reference"

    @property
    def course(self) -> Path:
        return self.root / "course"

    @property
    def solutions(self) -> Path:
        return self.root / "solutions"

    @property
    def shared_multi30k(self) -> Path:
        """The read-only Multi30k copy beside the checkout, where there is one: tests, CI and
        ``make compat`` read it instead of downloading."""
        return self.root.parent / "shared" / "data" / "multi30k"

    def prefer_shared_multi30k(self) -> None:
        """Read Multi30k from :attr:`shared_multi30k` where it exists and ``MULTI30K_DIR`` is unset
        (tests, CI, ``make compat``, ``make bench`` and a retraining build: no download)."""
        if self.shared_multi30k.is_dir():
            os.environ.setdefault("MULTI30K_DIR", str(self.shared_multi30k))

    @property
    def sample_class(self) -> Path:
        return self.autograder / "submitted"

    def assignments(self) -> list[Assignment]:
        found = sorted(self.source.glob(f"*/*{SOURCE_SUFFIX}"))
        return [Assignment(path.parent.name, path) for path in found]

    def assignment(self, name: str) -> Assignment:
        for assignment in self.assignments():
            if assignment.name == name:
                return assignment
        known = ", ".join(a.name for a in self.assignments())
        raise KeyError(f"unknown assignment {name!r}; the course has: {known}")


@dataclass(frozen=True)
class TestCell:
    grade_id: str
    points: float
    exercise: str
    hidden: bool  # holds hidden tests (their messages diagnose the mistake)


@dataclass(frozen=True)
class Question:
    """A question answered in words: an nbgrader manually graded answer cell (markdown,
    ``solution`` and ``grade``), which the instructor grades (formgrader), not the grader."""

    grade_id: str
    points: float


@dataclass(frozen=True)
class Assignment:
    """One nbgrader assignment: a folder under ``autograder/source`` with one notebook."""

    name: str
    source_file: Path

    @property
    def number(self) -> int:
        return int(self.name.split("_", 1)[0])

    @property
    def uses_blocks(self) -> bool:
        """Whether the notebook imports the provided module of earlier reference code."""
        return f"from {BLOCKS_MODULE[:-3]} import" in self.source_file.read_text()

    @property
    def provided(self) -> list[str]:
        """Hand-written files shipped with the assignment (e.g. ``multi30k.py``), besides the blocks."""
        skip = {BLOCKS_MODULE, self.source_file.name, self.source_notebook.name}
        return sorted(p.name for p in self.source_file.parent.iterdir()
                      if p.is_file() and p.name not in skip and p.suffix == ".py")

    @property
    def trains(self) -> bool:
        """Whether the notebook trains a model (notebook 07): its solution run is long and is
        kept between builds while its sources do not change."""
        return TRAIN_CONFIG_ENV in self.source_file.read_text()

    @property
    def notebook(self) -> str:
        """The notebook's file stem; by convention the assignment's name."""
        return self.source_file.name[: -len(SOURCE_SUFFIX)]

    @property
    def source_notebook(self) -> Path:
        """The .ipynb the build writes beside the jupytext source (gitignored)."""
        return self.source_file.with_name(self.notebook + ".ipynb")

    @cached_property
    def _cells(self) -> list[dict]:
        cells = read_source(self.source_file).cells
        return [dict(c.metadata.get("nbgrader", {}), source=c.source) for c in cells]

    @property
    def exercises(self) -> list[str]:
        """Public names (SPEC) in notebook order: the grade_ids of the answer cells."""
        return [m["grade_id"] for m in self._cells if m.get("solution") and not m.get("grade")]

    @property
    def tests(self) -> list[TestCell]:
        """The autograded test cells (``grade`` without ``solution``)."""
        cells = []
        for meta in self._cells:
            if meta.get("grade") and not meta.get("solution"):
                gid = meta["grade_id"]
                cells.append(TestCell(gid, float(meta.get("points", 0)), exercise_of(gid, self.exercises),
                                      _only_hidden(meta["source"])))
        return cells

    @property
    def upstream(self) -> dict[str, list[str]]:
        """For each exercise, the earlier exercises of this notebook it builds on: those its
        hidden tests swap for the reference (``upstream("softmax", ...)`` in a test cell)."""
        found: dict[str, list[str]] = {}
        for test in self.tests:
            source = next(m["source"] for m in self._cells if m.get("grade_id") == test.grade_id)
            for call in re.findall(r"upstream\(([^)]*)\)", source):
                names = re.findall(r"[\"']([A-Za-z_]\w*)[\"']", call)
                if not names and call.strip():  # e.g. upstream(*PARTS): every earlier exercise
                    names = self.exercises[: self.exercises.index(test.exercise)]
                for name in names:
                    if name in self.exercises and name not in found.setdefault(test.exercise, []):
                        found[test.exercise].append(name)
        return found

    @property
    def questions(self) -> list[Question]:
        """The questions answered in words, in notebook order (``grade`` and ``solution``).

        Raises:
            ValueError: for such a cell whose grade_id does not start with ``question_`` (a mistake
                in the source: an exercise's answer cell is ``solution`` alone).
        """
        found = [Question(m["grade_id"], float(m.get("points", 0))) for m in self._cells
                 if m.get("grade") and m.get("solution")]
        for q in found:
            if not q.grade_id.startswith("question_"):
                raise ValueError(f"{self.name}: cell {q.grade_id!r} is graded by hand (solution and grade); its "
                                 "grade_id must start with question_")
        return found

    def max_score(self, exercise: str | None = None) -> float:
        """Points of the autograded tests (of ``exercise``, or all); written answers are apart."""
        return sum(t.points for t in self.tests if exercise in (None, t.exercise))

    @property
    def manual_max_score(self) -> float:
        """Points of the questions answered in words, graded by hand."""
        return sum(q.points for q in self.questions)


def _only_hidden(source: str) -> bool:
    """True for a test cell whose code is all inside hidden blocks (a pure diagnostic cell)."""
    inside, visible = False, False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("### BEGIN HIDDEN TESTS"):
            inside = True
        elif stripped.startswith("### END HIDDEN TESTS"):
            inside = False
        elif stripped and not stripped.startswith("#") and not inside:
            visible = True
    return "### BEGIN HIDDEN TESTS" in source and not visible


def exercise_of(grade_id: str, exercises: list[str]) -> str:
    """The exercise a test cell belongs to: ``test_<name>`` or ``test_<name>_<suffix>``.

    Raises:
        ValueError: when the grade_id names no exercise (a mistake in the source).
    """
    matches = [e for e in exercises if grade_id == f"test_{e}" or grade_id.startswith(f"test_{e}_")]
    if not matches:
        raise ValueError(
            f"test cell {grade_id!r} does not name an exercise: its grade_id must be test_<name> "
            f"or test_<name>_<suffix> with <name> one of {exercises}"
        )
    return max(matches, key=len)


def read_notebook(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)
