"""Grading on Gradescope: ``transformer-course gradescope ASSIGNMENT --out autograder.zip``.

The zip follows Gradescope's autograder specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): ``setup.sh`` and
``run_autograder`` at its root, and the files the grader needs under ``course/`` (the
package, the hidden reference and checks, the assignment's source and shipped files). At
submission time ``run_autograder`` grades ``/autograder/submission/*.ipynb`` with this
project's grader and writes ``/autograder/results/results.json``: one test per exercise
(score, max_score, the one-line feedback as output). ``AUTOGRADER_ROOT`` moves
``/autograder`` elsewhere, which is how the tests run the bundle.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
import zipfile
from pathlib import Path

from transformer_course.grading.kernel import forkserver
from transformer_course.grading.notebook.grade import Grader, SubmissionResult, grader_failure, zero_scores
from transformer_course.grading.run import boundary
from transformer_course.grading.submission import intake
from transformer_course.grading.submission.handin import Releases, find_submission
from transformer_course.layout import Assignment, Repo

RELEASES = "releases.json"  # in the bundle's repository root: see _releases
VISIBILITY = ("hidden", "after_due_date", "after_published", "visible")

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image. Choose the Ubuntu 24.04 base
# image: the course needs Python >= 3.11.
set -euo pipefail
apt-get update -q
apt-get install -y -q python3 python3-venv python3-pip bubblewrap
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 needed: use Ubuntu 24.04")'
python3 -m venv /autograder/venv
# The CPU build of the pinned torch (no GPU on Gradescope), then the course with its exact pins.
/autograder/venv/bin/pip install -q --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
/autograder/venv/bin/pip install -q /autograder/source/course
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission. AUTOGRADER_ROOT (default /autograder) and
# AUTOGRADER_PYTHON (default the venv setup.sh made) let it run elsewhere, e.g. in tests.
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
cd "$ROOT/source/course"
exec "$PYTHON" -m transformer_course.instructors.gradescope run --root "$ROOT" --assignment {assignment} \\
  --timeout {timeout} --visibility {visibility}
"""


def _bundled(repo: Repo, assignment: str) -> list[Path]:
    """The repository files the grader needs for ``assignment`` (relative to the root)."""
    wanted = [repo.root / "pyproject.toml", repo.root / "README.md", repo.autograder / "nbgrader_config.py"]
    for folder in (repo.root / "src" / "transformer_course", repo.reference, repo.source / assignment,
                   repo.course / assignment):
        wanted += [p for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    return [p.relative_to(repo.root) for p in wanted]


def build_bundle(assignment: str, out: Path, repo: Repo | None = None, timeout: int = 60,
                 visibility: str = "visible") -> Path:
    """Write the autograder zip for ``assignment``; returns its path.

    Raises:
        KeyError: ``assignment`` is not an assignment of the course.
        ValueError: ``visibility`` is not one of Gradescope's settings.
    """
    repo = repo or Repo()
    repo.assignment(assignment)  # KeyError names the known ones
    if visibility not in VISIBILITY:
        raise ValueError(f"visibility {visibility!r}; expected one of {', '.join(VISIBILITY)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER.format(
                assignment=assignment, timeout=timeout, visibility=visibility))):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16  # executable: Gradescope runs both directly
            info.compress_type = zipfile.ZIP_DEFLATED
            bundle.writestr(info, text)
        for path in _bundled(repo, assignment):
            bundle.write(repo.root / path, f"course/{path.as_posix()}")
        # every assignment's released cells (no answer): another assignment's notebook is named as such
        bundle.writestr(f"course/{RELEASES}", Releases(repo.assignments()).to_json())
    return out


def _releases(repo: Repo) -> Releases:
    """The course's releases: those the bundle carries, else (a repository) read from the sources."""
    path = repo.root / RELEASES
    return Releases.from_json(path.read_text()) if path.is_file() else Releases(repo.assignments())


def _folder(submission: Path, assignment: Assignment) -> Path:
    """The folder of the upload that holds its notebooks: the upload itself, or, for an upload from a
    repository, the folder where it keeps them (``course/NN_name/``)."""
    places = sorted({p.parent for p in submission.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts})
    if not places or submission in places:
        return submission
    named = [p for p in places if p.name == assignment.name]
    return named[0] if named else places[0] if len(places) == 1 else submission


def results_json(result: SubmissionResult, note: str, visibility: str, written: float = 0.0) -> dict:
    """Gradescope's results.json for one graded notebook: one test per exercise. ``written``: the
    points of its questions answered in words, which Gradescope's own manual grading scores (the
    instructor creates them there); the output says so, and they are not among the tests."""
    tests = [{"name": e.exercise, "score": e.score, "max_score": e.max_score,
              "output": e.feedback or "All tests passed.", "visibility": visibility} for e in result.exercises]
    summary = f"{result.assignment}: {result.score:g} / {result.max_score:g}."
    if written:
        summary += (f" The answers in words ({written:g} points) are graded by hand, apart from this score: they "
                    "await your instructor.")
    return {"score": result.score, "output": " ".join(s for s in (note.strip(), summary, result.reason) if s),
            "stdout_visibility": "hidden", "tests": tests}


def run(root: Path, assignment_name: str, timeout: int = 60, visibility: str = "visible") -> dict:
    """Grade ``ROOT/submission`` and write ``ROOT/results/results.json``; never raises for
    anything the submission holds: the whole of one submission's grading is its boundary
    (:mod:`~transformer_course.grading.run.boundary`), and what fails in it is said in the file, at 0 points
    (``invalid`` or ``refused`` where the upload cannot be read, else the grader's failure)."""
    repo = Repo()
    assignment = repo.assignment(assignment_name)
    note = ""
    with boundary.pair("intake") as failed:
        # found and read as the class grader does: recognised by its cells, no link followed, the size capped
        handed = find_submission(_folder(root / "submission", assignment), assignment, intake.DEFAULT_MAX_MB,
                                 _releases(repo))
    if failed:
        traceback.print_exception(failed[0].error)  # to Gradescope's stdout, for the instructor
        result = SubmissionResult("student", assignment.name, failed[0].status, failed[0].reason,
                                  zero_scores(assignment, failed[0].reason))
    elif handed.path is None or handed.data is None:
        result = SubmissionResult("student", assignment.name, handed.status or "missing", handed.note,
                                  zero_scores(assignment, handed.note or "not handed in"))
    else:
        note = handed.note
        with tempfile.TemporaryDirectory(prefix="tc-gradescope-") as tmp:
            copy = Path(tmp) / "in" / handed.path.name
            copy.parent.mkdir()
            copy.write_bytes(handed.data)
            try:
                result = Grader(Path(tmp) / "nbgrader", repo, timeout, only=assignment.name).grade(
                    "student", assignment, copy, "")
            except Exception as exc:  # noqa: BLE001 (GraderError or worse: results.json is written whatever happens)
                traceback.print_exc()  # to Gradescope's stdout, for the instructor
                result = grader_failure("student", assignment, exc)
            finally:
                forkserver.stop_all()  # its kernel template mounts the folder about to be removed
    results = results_json(result, note, visibility, assignment.manual_max_score)
    (root / "results").mkdir(parents=True, exist_ok=True)
    (root / "results" / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_course.instructors.gradescope", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="grade ROOT/submission into ROOT/results/results.json (run_autograder)")
    p.add_argument("--root", type=Path, default=Path("/autograder"))
    p.add_argument("--assignment", required=True)
    p.add_argument("--timeout", type=int, default=60)
    p.add_argument("--visibility", choices=VISIBILITY, default="visible")
    args = parser.parse_args(argv)
    run(args.root, args.assignment, args.timeout, args.visibility)
    return 0


if __name__ == "__main__":
    sys.exit(main())
