"""``make bench`` (``--hostile-only``): a hostile class graded as an instructor grades it, and the long
profile of the generated hostile input.

A class of two honest students and one of each hostile hand-in the grader has met (JSON nested 2,000
deep, 30,000 code cells, 60,000 markdown cells, a notebook of binary bytes, hand-in times at the
calendar's edges and before the course, a hard link to the solution, a correct notebook with another
assignment's cells added, a cell id of a million characters) is graded by the command line with one
and with two workers. Figures: the grade process's peak memory (bound: 1 GB), the run's seconds, the
seconds the 30,000-cell notebook takes to be read and decided (bound: 30 s), each hostile student's
status and reason; checked: every table written, the honest students' rows those of a class without
the hostile ones. Then every property test (``pytest -m hypothesis``) under the long profile.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from transformer_course.layout import Repo

ASSIGNMENT = "01_self_attention"
HONEST = ("ada", "cho")
MEMORY_BOUND_MB = 1024
DECIDE_BOUND_S = 30.0


def _notebook(cells: list[dict]) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}


def hostile_class(repo: Repo, root: Path) -> Path:
    """The class described in the module's docstring, under ``root/submitted``."""
    submitted = root / "submitted"
    source = repo.sample_class / "ada" / ASSIGNMENT
    released = json.loads((source / f"{ASSIGNMENT}.ipynb").read_text())
    for student in (*HONEST, "deep", "cells", "markdown", "bytes", "y9999", "y1970", "linked", "extra", "cellid"):
        shutil.copytree(source, submitted / student / ASSIGNMENT)
    nb = lambda s: submitted / s / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"  # noqa: E731
    nb("deep").write_text('{"metadata": ' + "[" * 2000 + "]" * 2000 + ', "cells": []}')
    code = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "source": "x = 1", "outputs": [],
             "execution_count": None} for i in range(30_000)]
    nb("cells").write_text(json.dumps({**released, "cells": released["cells"] + code}))
    marks = [{"cell_type": "markdown", "id": f"m{i}", "metadata": {}, "source": "words"} for i in range(60_000)]
    nb("markdown").write_text(json.dumps({**released, "cells": released["cells"] + marks}))
    nb("bytes").write_bytes(os.urandom(200_000))
    (submitted / "y9999" / ASSIGNMENT / "timestamp.txt").write_text("9999-12-31 23:59:59.999999+00:00")
    (submitted / "y1970" / ASSIGNMENT / "timestamp.txt").write_text("1970-01-01 00:00:00+00:00")
    nb("linked").unlink()
    os.link(repo.solutions / f"{ASSIGNMENT}.ipynb", nb("linked"))
    other = json.loads((repo.sample_class / "ada" / "02_scaled_dot_product" / "02_scaled_dot_product.ipynb")
                       .read_text()) if (repo.sample_class / "ada" / "02_scaled_dot_product").is_dir() else None
    if other is not None:
        nb("extra").write_text(json.dumps({**released, "cells": released["cells"] + other["cells"]}))
    odd = json.loads(json.dumps(released))
    odd["cells"][0]["id"] = "x" * 1_000_000
    nb("cellid").write_text(json.dumps(odd))
    return submitted


def _rows(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv", newline="") as f:
        return {r["student_id"]: r for r in csv.DictReader(f)}


def grade(submitted: Path, out: Path, workers: int) -> tuple[int, float, float]:
    """``transformer-course grade`` as typed: exit code, seconds, the grade process's peak memory (MB)."""
    command = [str(Path(sys.executable).parent / "transformer-course"), "grade", str(submitted), "--out", str(out),
               "--assignment", "01", "--workers", str(workers), "--deadlines",
               str(Repo().root / "autograder" / "deadlines.toml")]
    start, peak = time.monotonic(), 0
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watched = psutil.Process(process.pid)
    while process.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.Error:
            pass
        time.sleep(0.2)
    return process.returncode, time.monotonic() - start, peak / 2**20


def decide_seconds(repo: Repo, notebook: Path) -> tuple[float, str]:
    """Seconds to find, read and decide one notebook (what the grader does before any kernel), and what
    it decided."""
    from transformer_course.grading.notebook.grade import read_submission
    from transformer_course.grading.submission.handin import Releases, find_submission

    known = Releases(repo.assignments())
    assignment = repo.assignment(ASSIGNMENT)
    start = time.monotonic()
    handed = find_submission(notebook.parent, assignment, 50.0, known)
    decided = handed.status or "to grade"
    if handed.path is not None:
        import nbformat

        from transformer_course.grading.submission import intake

        released = nbformat.read(assignment.source_notebook, 4)  # the release's cells (solutions stripped)
        nb, why = read_submission(handed.path, intake.cell_cap(len(released.cells)))  # as the grader caps it
        decided = "invalid" if nb is None else decided
        decided += f" ({(why or handed.note).strip()[:120]})" if (why or handed.note).strip() else ""
    return time.monotonic() - start, decided


def main() -> int:
    repo = Repo()
    failures = []
    with tempfile.TemporaryDirectory(prefix="tc-hostile-") as tmp:
        submitted = hostile_class(repo, Path(tmp))
        honest = Path(tmp) / "honest"
        for student in HONEST:
            shutil.copytree(submitted / student, honest / student)
        seconds, decided = decide_seconds(repo, submitted / "cells" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
        print(f"\nA notebook of 30,000 code cells, found, read and decided in {seconds:.2f} s "
              f"(bound {DECIDE_BOUND_S:g} s: {'ok' if seconds <= DECIDE_BOUND_S else 'OVER'}): {decided}")
        failures += [] if seconds <= DECIDE_BOUND_S else ["30,000 cells"]
        code, _, _ = grade(honest, Path(tmp) / "out-honest", 2)
        baseline = _rows(Path(tmp) / "out-honest")
        for workers in (1, 2):
            out = Path(tmp) / f"out-{workers}"
            code, seconds, peak = grade(submitted, out, workers)
            written = all((out / n).is_file() for n in ("grades.csv", "lms.csv", "exercises.csv", "results.json"))
            rows = _rows(out) if written else {}
            same = written and all(rows.get(s) == baseline.get(s) for s in HONEST)
            print(f"\nThe hostile class, --workers {workers}: exit {code}, {seconds:.0f} s, grade process at most "
                  f"{peak:.0f} MB (bound {MEMORY_BOUND_MB} MB: {'ok' if peak <= MEMORY_BOUND_MB else 'OVER'}); "
                  f"every table written: {written}; honest rows unchanged: {same}")
            for student, row in sorted(rows.items()):
                if student not in HONEST:
                    print(f"  {student:9s} {row['status']:14s} {row['score']:>3s}/{row['max_score']}  "
                          f"{row['reason'][:150]}")
            if not (written and same and peak <= MEMORY_BOUND_MB):
                failures.append(f"--workers {workers}")
    print("\nThe generated hostile input, long profile (HYPOTHESIS_PROFILE=long, every `pytest -m hypothesis` test):")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "hypothesis", "-p", "no:cacheprovider"],
                          env={**os.environ, "HYPOTHESIS_PROFILE": "long"}, cwd=repo.root)
    if done.returncode:
        failures.append("the long profile")
    print("\nThe runs kept out of `make test` (`pytest -m slow`: Ctrl-C with two workers, SIGTERM, Ctrl-C while a "
          "solution is measured, a sleeping notebook, a fork bomb, the pins installed into an empty environment):")
    if subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "slow", "-p", "no:cacheprovider"],
                      cwd=repo.root).returncode:
        failures.append("the slow tests")
    if failures:
        print(f"\nOUT OF BOUNDS or FAILED: {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
