"""Time limits that scale with the machine that grades.

A cell's limit is ``--timeout``, or :data:`~.nbgrader_setup.LIMIT_MULTIPLE` times what the same cell of
the solution takes on this machine when that is longer: a slow laptop raises the limits of the cells
that are slow everywhere (a training test, a long demonstration) and leaves the rest as they are. The
seconds are CPU seconds of the notebook's own processes (its kernel's and its judge's,
:mod:`.cputime`), as the limits are: other work on the machine does not change them, so a
measurement made on a busy machine is not a smaller budget than one made on a quiet one. The
solution notebook of an assignment is graded once per machine, through the grader itself (so its
judged test cells are timed as a student's are), and the seconds of its cells are kept in
``data/cache/limits/``, under a key made of the grader's version, the machine and the threads a
kernel gets: the next grading run on the same machine reads them.

Grading the solution checks the machine too: a solution that does not score full marks here is
reported to whoever grades a class, at each run, from a note kept beside the seconds (the grades of
this machine could not be trusted); the seconds are kept either way, so it is graded once per machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import nbformat

from transformer_course.grading.notebook.nbgrader_setup import SECONDS_KEY
from transformer_course.layout import Assignment, Repo


def cache_file(repo: Repo, assignment: Assignment, version: str) -> Path:
    """Where the solution's seconds of ``assignment`` are kept for this machine and thread count."""
    machine = "|".join([platform.node(), platform.machine(), platform.processor(), str(os.cpu_count()),
                        os.environ.get("OMP_NUM_THREADS", ""), sys.version.split()[0]])
    key = hashlib.sha256(f"{version}|{machine}".encode()).hexdigest()[:16]
    return repo.root / "data" / "cache" / "limits" / f"{assignment.name}-{key}.json"


def load(path: Path) -> dict[str, float] | None:
    """The seconds kept at ``path``, or None (not measured yet, or a damaged file)."""
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and all(isinstance(v, int | float) for v in data.values()):
            return {str(k): float(v) for k, v in data.items()}
    return None


def save(path: Path, seconds: dict[str, float]) -> None:
    """Keep ``seconds`` at ``path`` (written whole, then renamed: a reader never sees half a file)."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_suffix(f".{os.getpid()}.part")
        part.write_text(json.dumps(seconds, indent=1, sort_keys=True) + "\n")
        part.replace(path)


def _shortfall_file(path: Path) -> Path:
    return path.with_suffix(".shortfall")


def save_shortfall(path: Path, text: str) -> None:
    """Keep beside the seconds at ``path`` what the solution lost when they were measured ("" for
    nothing: any earlier note is removed)."""
    note = _shortfall_file(path)
    with contextlib.suppress(OSError):
        if text:
            part = note.with_suffix(f".{os.getpid()}.part")
            part.write_text(text + "\n")
            part.replace(note)
        else:
            note.unlink(missing_ok=True)


def shortfall(path: Path) -> str:
    """What the solution lost when the seconds at ``path`` were measured, or ""."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return _shortfall_file(path).read_text().strip()
    return ""


def measured(autograded: Path) -> dict[str, float]:
    """CPU seconds of each graded or answer cell of an autograded notebook, by grade_id."""
    nb: Any = nbformat.read(autograded, as_version=4)
    seconds = {}
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id and SECONDS_KEY in cell.metadata:
            seconds[grade_id] = float(cell.metadata[SECONDS_KEY])
    return seconds


def unmeasured(repo: Repo, assignments: list[Assignment], threads: int) -> list[str]:
    """The names of ``assignments`` whose solution this machine has not measured yet at ``threads``
    threads a kernel (what the first notebook of each will wait for: the solution graded first)."""
    from transformer_course.grading.version import grader_version

    before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(threads)  # as the grading worker sets it (the cache's key)
    try:
        version = grader_version(repo)
        return [a.name for a in assignments if (repo.solutions / f"{a.notebook}.ipynb").is_file()
                and load(cache_file(repo, a, version)) is None]
    finally:
        if before is None:
            del os.environ["OMP_NUM_THREADS"]
        else:
            os.environ["OMP_NUM_THREADS"] = before
