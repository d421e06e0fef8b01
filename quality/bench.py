"""``make bench``: figures, not tests. Prints seconds and ratios measured in one run.

- seconds to execute each solution notebook (target <= 30 s on 2 CPU cores);
- the catalogue through the real grading path: share of correct variants at full marks
  (target 100%), of mistakes caught (100%) and named in the feedback (>= 90%);
- where grading one notebook spends its time, phase by phase (kernel start, imports, student
  cells, test cells, outside comparison, nbgrader bookkeeping, feedback), with kernels forked
  from the template and started fresh, against the notebook's own cells in a plain kernel
  (target: grading <= 1.5x those);
- a generated class of 30 students x every notebook (8): seconds per notebook and the speed-up of
  ``transformer-course grade`` (parallel) against serial ``nbgrader autograde`` (nbgrader's
  CLI, same config), target >= 2.5x on 2 cores with the sandbox on, identical per-cell scores;
- training throughput (target tokens per second, forward+backward+step) of the reference
  ``Transformer`` against ``torch.nn.Transformer`` of the same size on the same batches
  (target ratio >= 0.9);
- the attacks of ``attacks.py`` defended (of how many), and the grading sandbox's overhead;
- a hostile class graded with one and two workers (``hostile.py``: the grade process under 1 GB,
  every table written, the honest rows unchanged, a 30,000-cell notebook decided within 30 s) and
  the long profile of every property test;
- a Canvas push of 300 students x 8 assignments to a local Canvas within 60 s (``--lms-only``, quality/lms_bench.py);
- the same class through LTI 1.3 Advantage (roster and scores) to a local platform within 60 s (``--lti-only``,
  quality/lti_bench.py);
- BLEU against time of notebook 07's CPU configuration, as recorded by the executed
  ``solutions/07_training.ipynb`` (``--train`` runs it again: about 12 minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from quality import hostile
from transformer_course.course.build import convert_sources, run_solution
from transformer_course.grading.notebook.nbgrader_setup import tools_on_path
from transformer_course.grading.notebook.workarea import environ, reference_on_path
from transformer_course.layout import Repo

# Students of the sample class whose notebooks run to the end (no endless loop, no crash):
# the comparison is about grading overhead, not about waiting out a timeout.
BENCH_STUDENTS = ["ada", "ben", "cho", "dev", "eun", "fay", "jon"]


def time_solutions(repo: Repo) -> list[tuple[str, float]]:
    """Seconds per solution notebook; notebook 07 with its one-minute ``tiny`` configuration."""
    rows = []
    for assignment in convert_sources(repo):
        start = time.perf_counter()
        run_solution(assignment, train_config="tiny")
        label = f"{assignment.name} (tiny)" if assignment.trains else assignment.name
        rows.append((label, time.perf_counter() - start))
    return rows


class TorchTransformer(torch.nn.Module):
    """``nn.Transformer`` with the reference's embeddings and generator: the same function."""

    def __init__(self, reference: torch.nn.Module, d_model: int, heads: int, layers: int, d_ff: int, dropout: float):
        super().__init__()
        self.src_embed, self.tgt_embed = reference.src_embed, reference.tgt_embed
        self.positional_encoding, self.generator = reference.positional_encoding, reference.generator
        self.pad_id = reference.pad_id
        self.core = torch.nn.Transformer(d_model, heads, layers, layers, d_ff, dropout, batch_first=True)
        self.core.encoder.norm = self.core.decoder.norm = None  # the SPEC's stacks have none

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        size = tgt.size(1)
        causal = torch.ones(size, size, dtype=torch.bool, device=tgt.device).triu(1)  # True = blocked
        out = self.core(self.positional_encoding(self.src_embed(src)), self.positional_encoding(self.tgt_embed(tgt)),
                        tgt_mask=causal, src_key_padding_mask=src == self.pad_id,
                        tgt_key_padding_mask=tgt == self.pad_id, memory_key_padding_mask=src == self.pad_id)
        return self.generator(out)


def time_training_throughput(repo: Repo, steps: int = 8, device: str = "cpu") -> dict[str, float]:
    """Target tokens per second of training steps, reference Transformer vs nn.Transformer, with
    notebook 07's CPU configuration (D=256, h=8, N=2, d_ff=1024, V=4000) on the same batches of
    Multi30k-like lengths, interleaved so both see the same machine load."""
    sys.path.insert(0, str(repo.reference))
    from course_reference.nb06_transformer import Transformer
    from course_reference.nb07_training import LabelSmoothingLoss

    torch.manual_seed(0)
    vocab, d_model, heads, layers, d_ff = 4000, 256, 8, 2, 1024
    ours = Transformer(vocab, vocab, d_model, heads, layers, d_ff, 0.1).to(device)
    theirs = TorchTransformer(Transformer(vocab, vocab, d_model, heads, layers, d_ff, 0.1), d_model, heads,
                              layers, d_ff, 0.1).to(device)
    gen = torch.Generator().manual_seed(0)
    batches = []
    for length in (12, 16, 20, 24, 28, 32):  # ~2,000 target tokens each, as the CPU configuration's batches
        rows = 2000 // length
        src = torch.randint(4, vocab, (rows, length), generator=gen)
        tgt = torch.randint(4, vocab, (rows, length + 1), generator=gen)
        src[rows // 2:, -3:] = 0  # some padding
        tgt[rows // 2:, -2:] = 0
        batches.append((src.to(device), tgt.to(device)))
    loss_fn = LabelSmoothingLoss(0.1, ignore_index=0)
    models = {"reference Transformer": ours, "nn.Transformer (same size)": theirs}
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=1e-4) for name, m in models.items()}
    seconds = {name: 0.0 for name in models}
    tokens = 0
    for i in range(steps + 1):
        src, tgt = batches[i % len(batches)]
        for name, model in models.items():
            start = time.perf_counter()
            logits = model(src, tgt[:, :-1])
            loss = loss_fn(logits, tgt[:, 1:])
            optimizers[name].zero_grad()
            loss.backward()
            optimizers[name].step()
            if device == "cuda":
                torch.cuda.synchronize()
            if i:  # the first round warms up
                seconds[name] += time.perf_counter() - start
        tokens += int((tgt[:, 1:] != 0).sum()) if i else 0
    return {name: tokens / s for name, s in seconds.items()}


def recorded_training(repo: Repo) -> list[str]:
    """The lines notebook 07 printed about its run, from the executed solution notebook."""
    import nbformat

    nb = nbformat.read(repo.solutions / "07_training.ipynb", as_version=4)
    keep = ("configuration ", "BLEU against time", "  minutes", "val:", "test_2016_flickr:", "sacreBLEU")
    lines = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            for line in output.get("text", "").splitlines():
                if line.strip().startswith(keep) or line.startswith("  ") and line.strip()[:1].isdigit():
                    lines.append(line)
    return lines


def make_class(repo: Repo, target: Path, students: int = 30) -> int:
    """A class of ``students`` students x every notebook, cycling through the sample class's
    complete hand-ins (correct, other styles, mistakes); returns the number of notebooks."""
    sources = [s for s in BENCH_STUDENTS if len(list((repo.sample_class / s).iterdir())) == len(repo.assignments())]
    for i in range(students):
        shutil.copytree(repo.sample_class / sources[i % len(sources)], target / f"s{i + 1:02d}")
    return sum(1 for _ in target.rglob("*.ipynb"))


def _bare_scores(root: Path, repo: Repo) -> dict[tuple[str, str], dict[str, float]]:
    from nbgrader.api import Gradebook

    from transformer_course.layout import COURSE_ID

    scores = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", COURSE_ID) as gb:
        for assignment in repo.assignments():
            tests = {t.grade_id for t in assignment.tests}  # as Grader.grade_cells: not the written answers
            for sub in gb.assignment_submissions(assignment.name):
                notebook = gb.find_submission_notebook(assignment.notebook, assignment.name, sub.student.id)
                scores[(sub.student.id, assignment.name)] = {g.name: float(g.score or 0) for g in notebook.grades
                                                             if g.name in tests}
    return scores


def bare_course(repo: Repo, root: Path, timeout: int) -> dict[str, str]:
    """``root`` made an nbgrader course with the course's configuration (an ``nbgrader_config.py``), as
    an instructor who runs nbgrader's own commands has it; returns the environment to run them in (this
    process's, with the course's tools on PATH: nothing of the course's grader around them)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "nbgrader_config.py").write_text(
        "from pathlib import Path\n"
        "from transformer_course.layout import Repo\n"
        "from transformer_course.grading.notebook.nbgrader_setup import make_config\n"
        f"c.merge(make_config(Path({str(root)!r}), Repo(Path({str(repo.root)!r})), {timeout}))\n"
    )
    tools_on_path()
    return dict(os.environ)


def time_grading(repo: Repo, timeout: int = 30, students: int = 30) -> dict[str, float]:
    """Serial ``nbgrader autograde`` (its own CLI, one assignment after another, the course's
    config) against ``transformer-course grade`` (parallel, one process per core, plus feedback
    pages, CSVs and the class gradebook) on the same generated class; checks identical scores."""
    bin_dir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory(prefix="tc-bench-") as tmp:
        tmp = Path(tmp)
        notebooks = make_class(repo, tmp / "submitted", students)
        bare = tmp / "bare"
        shutil.copytree(tmp / "submitted", bare / "submitted")
        env = bare_course(repo, bare, timeout)
        nbgrader = str(bin_dir / "nbgrader")
        for assignment in repo.assignments():  # the release is set-up, not grading: not timed
            subprocess.run([nbgrader, "generate_assignment", assignment.name, "--force"], check=True,
                           capture_output=True, cwd=bare, env=env)
        start = time.perf_counter()
        for assignment in repo.assignments():
            subprocess.run([nbgrader, "autograde", assignment.name, "--create", "--force"], check=True,
                           capture_output=True, cwd=bare, env=env)
        serial = time.perf_counter() - start

        # Set-up, as the release is for nbgrader: the solutions' cell limits, measured once per machine and grader
        # version by whichever `grade` comes first (a term's first), through a class of one student, untimed. The
        # timed run is then what every later `grade` of the term is; the measurement's seconds are reported apart.
        first = tmp / "first"
        shutil.copytree(tmp / "submitted" / "s01", first / "submitted" / "s01")
        start = time.perf_counter()
        subprocess.run([str(bin_dir / "transformer-course"), "grade", str(first / "submitted"), "--out",
                        str(first / "out"), "--timeout", str(timeout)], check=True, capture_output=True, cwd=repo.root)
        limits_seconds = time.perf_counter() - start

        start = time.perf_counter()
        subprocess.run([str(bin_dir / "transformer-course"), "grade", str(tmp / "submitted"),
                        "--out", str(tmp / "ours"), "--timeout", str(timeout)],
                       check=True, capture_output=True, cwd=repo.root)
        parallel = time.perf_counter() - start
        theirs = _bare_scores(bare, repo)
        ours = {}
        for record in (tmp / "ours" / "results").rglob("*.json"):
            data = json.loads(record.read_text())
            ours[(data["result"]["student_id"], data["result"]["assignment"])] = data["cells"]
    same = sum(ours.get(key) == cells for key, cells in theirs.items())
    return {"notebooks": notebooks, "students": students, "serial nbgrader autograde (s)": serial,
            "transformer-course grade (s)": parallel, "identical": same, "compared": len(theirs),
            "first run of one student, limits measured where they were not (s)": limits_seconds}


PHASES = ["kernel start", "guard (installs the guard, imports torch)", "student cells", "test cells (checks)",
          "kernel shutdown", "messages and the rest of execution", "outside comparison (verify.py)",
          "nbgrader bookkeeping", "feedback page", "work area reset"]


@contextlib.contextmanager
def _timed(cls: type, name: str, phase: Any, into: dict[str, float]) -> Iterator[None]:
    """Add the seconds each call of ``cls.name`` takes to ``into[phase(args)]`` (phase: a name, or a
    function of the call's arguments returning one, or None to skip) for the block."""
    original = getattr(cls, name)

    def label(args: tuple) -> str | None:
        return phase(*args) if callable(phase) else phase

    if inspect.iscoroutinefunction(original):
        async def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                if (key := label(args)) is not None:
                    into[key] = into.get(key, 0.0) + time.perf_counter() - start
    else:
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                if (key := label(args)) is not None:
                    into[key] = into.get(key, 0.0) + time.perf_counter() - start
    setattr(cls, name, wrapper)
    try:
        yield
    finally:
        setattr(cls, name, original)


def _cell_phase(_self: Any, cell: Any, *_: Any) -> str | None:
    if cell.cell_type != "code":
        return None
    if cell.metadata.get("course_guard"):
        return PHASES[1]
    return PHASES[3] if cell.metadata.get("course_guard_source") is not None else PHASES[2]


def plain_cell_seconds(path: Path, reference: Path) -> float:
    """Seconds the cells of notebook ``path`` take, run top to bottom in a plain kernel (not
    sandboxed, no guard; kernel start not counted)."""
    return plain_run(path, reference)[0]


def plain_run(path: Path, reference: Path) -> tuple[float, int]:
    """(seconds, cells that raised) of notebook ``path`` run top to bottom in a plain kernel. A
    baseline is only one while no cell raised: a cell that fails at once costs nothing."""
    import nbformat
    from nbclient import NotebookClient

    from transformer_course.grading.notebook.nbgrader_setup import KERNEL_ARGS

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True, extra_arguments=KERNEL_ARGS,
                            resources={"metadata": {"path": str(path.parent)}})
    total = 0.0
    with reference_on_path(reference), client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            start = time.perf_counter()
            client.execute_cell(cell, index)
            total += time.perf_counter() - start if cell.cell_type == "code" else 0.0
    raised = sum(any(o.get("output_type") == "error" for o in c.get("outputs", [])) for c in nb.cells)
    return total, raised


def grading_breakdown(repo: Repo, students: tuple[str, ...] = ("ada", "ben")) -> dict[str, dict[str, float]]:
    """Seconds per notebook in each phase of grading, one process, one thread (as each of the class
    run's workers), kernels forked from the template and started fresh, interleaved per notebook;
    and the seconds the same notebooks' own cells take in a plain kernel."""
    from nbclient import NotebookClient

    from transformer_course.grading.kernel import forkserver
    from transformer_course.grading.notebook.grade import Grader
    from transformer_course.grading.notebook.nbgrader_setup import KeepGradesOnCrash, UnguardNotebook

    # "forked": as `make grade` runs (kernels forked from the template, each notebook's judge in a box);
    # "judge in the worker": the same with the judge in the grading worker's process, as before the box
    # (COURSE_JUDGE_BOX=off); "fresh": kernels started fresh; "in the kernel": the checks run in the
    # student's kernel under the guard, as before the judge (COURSE_JUDGE=off).
    settings = {"forked": {}, "judge in the worker": {"COURSE_JUDGE_BOX": "off"},
                "fresh": {"COURSE_FORKSERVER": "off"}, "in the kernel": {"COURSE_JUDGE": "off"}}
    phases: dict[str, dict[str, float]] = {mode: {} for mode in settings}
    totals = dict.fromkeys(phases, 0.0)
    per_notebook: dict[str, dict[str, float]] = {}
    plain, count, raised = 0.0, 0, 0
    with tempfile.TemporaryDirectory(prefix="tc-bench-phases-") as tmp, environ(OMP_NUM_THREADS="1"):
        graders = {}
        for mode in phases:
            with environ(**settings[mode]):
                graders[mode] = Grader(Path(tmp) / mode.replace(" ", "-"), repo, timeout=120)
        # Untimed: each solution's cell limits (graded once per machine and thread count; this one thread
        # has its own) and each mode's first notebook (templates start): whichever mode came first paid both.
        with environ(**settings["forked"]):
            for assignment in graders["forked"].assignments:
                graders["forked"].calibrate(assignment)
        first = graders["forked"].assignments[0]
        for mode, grader in graders.items():
            with environ(**settings[mode]):
                grader.grade(students[0], first, repo.sample_class / students[0] / first.name
                             / f"{first.notebook}.ipynb", "", Path(tmp) / "feedback")
        for student in students:
            for assignment in graders["forked"].assignments:
                path = repo.sample_class / student / assignment.name / f"{assignment.notebook}.ipynb"
                count += 1
                row = per_notebook.setdefault(assignment.notebook, dict.fromkeys([*phases, "plain"], 0.0))
                order = list(graders.items())
                order = order[count % len(order):] + order[:count % len(order)]  # no mode always first
                for mode, grader in order:
                    into = phases[mode]
                    with contextlib.ExitStack() as stack, environ(**settings[mode]):
                        for cls, name, phase in [
                            (NotebookClient, "start_new_kernel", PHASES[0]),
                            (NotebookClient, "start_new_kernel_client", PHASES[0]),
                            (NotebookClient, "_cleanup_kernel", PHASES[4]),
                            (KeepGradesOnCrash, "preprocess_cell", _cell_phase),
                            (KeepGradesOnCrash, "preprocess", "execute"),
                            (UnguardNotebook, "preprocess", PHASES[6]),
                            (type(grader.api), "autograde", "autograde"),
                            (type(grader.api), "generate_feedback", PHASES[8]),
                            (Grader, "_reset", PHASES[9]),
                        ]:
                            stack.enter_context(_timed(cls, name, phase, into))
                        start = time.perf_counter()
                        grader.grade(student, assignment, path, "", Path(tmp) / "feedback")
                        totals[mode] += time.perf_counter() - start
                        row[mode] += time.perf_counter() - start
                # The same notebook as graded (answers, visible and hidden tests), in a plain kernel, with
                # the files it imports beside it (course_blocks.py, ...), as the grader has them.
                folder = Path(tmp) / "plain" / student / assignment.name
                shutil.copytree(graders["fresh"].autograded(assignment).parent, folder)
                graded = folder / f"{assignment.notebook}.ipynb"
                seconds, errors = plain_run(graded, repo.reference)
                plain += seconds
                raised += errors
                row["plain"] += seconds
        forkserver.stop_all()
    result = {}
    for mode, into in phases.items():
        execute = into.pop("execute", 0.0)
        into[PHASES[5]] = execute - sum(into.get(p, 0.0) for p in PHASES[:5])
        into[PHASES[7]] = into.pop("autograde", 0.0) - execute - into.get(PHASES[6], 0.0)
        into["total"] = totals[mode]
        result[mode] = {name: into.get(name, 0.0) / count for name in [*PHASES, "total"]}
    result["plain"] = {"own cells": plain / count, "cells that raised": raised, "notebooks": count}
    result["per notebook"] = per_notebook
    return result


def time_check(repo: Repo, repeats: int = 3) -> list[tuple[str, float, float, float, bool]]:
    """(notebook, seconds of `transformer-course check` on its executed solution as a user types it
    with the warm server answering (median of ``repeats``), the same from nothing (no server), seconds
    its own cells take in a plain kernel (median of ``repeats``), whether every check printed the same
    table), for each notebook. Each notebook is checked once untimed first: that starts the server, and
    times the solution where this machine has no limits for it yet (:mod:`.limits`)."""
    from transformer_course.cli import CHECK_TIMEOUT
    from transformer_course.grading import check_server

    cli = Path(sys.executable).with_name("transformer-course")

    printed: set[str] = set()

    def check(path: Path, **env: str) -> float:
        start = time.perf_counter()
        done = subprocess.run([str(cli), "check", str(path)], check=True, capture_output=True, text=True,
                              cwd=repo.root, env={**os.environ, **env})
        printed.add(done.stdout)
        return time.perf_counter() - start

    rows = []
    for path in sorted(repo.solutions.glob("[0-9][0-9]_*.ipynb")):
        own = statistics.median(plain_cell_seconds(path, repo.reference) for _ in range(repeats))
        check(path)
        check_server.ready(repo, CHECK_TIMEOUT)  # set up: the run from nothing then has the machine to itself
        printed.clear()
        cold = check(path, COURSE_CHECK_SERVER="off")
        warm = statistics.median(check(path) for _ in range(repeats))
        rows.append((path.stem, warm, cold, own, len(printed) == 1))
    return rows


def print_check(rows: list[tuple[str, float, float, float, bool]]) -> None:
    print("\n`transformer-course check` on each executed solution, as a user types it (s; answered by the warm "
          "server: median of 3; from nothing: one run) against the notebook's own cells in a plain kernel "
          "(median of 3; kernel start not counted):")
    for name, warm, cold, own, same in rows:
        ratio = warm / own
        print(f"  {name:24s} check {warm:5.2f}  from nothing {cold:5.2f}  own cells {own:5.2f}  ratio {ratio:4.2f} "
              f"(target <= 2: {'ok' if ratio <= 2 else 'OVER TARGET'}); from nothing {cold / own:4.2f}; "
              f"{'the same table every time' if same else 'TABLES DIFFER between the checks'}")


def print_breakdown(phases: dict[str, dict[str, float]]) -> None:
    own = phases["plain"]["own cells"]
    print("\nWhere grading one notebook spends its time (s per notebook: the sample class's ada and ben, "
          f"{phases['plain'].get('notebooks', 0)} notebooks, one process, one thread):")
    print(f"  {'phase':44s} {'as graded':>10s} {'judge in the worker':>20s} {'fresh kernel':>13s} "
          f"{'checks in the kernel':>21s}")
    for name in [*PHASES, "total"]:
        print(f"  {name:44s} {phases['forked'][name]:10.2f} {phases['judge in the worker'][name]:20.2f} "
              f"{phases['fresh'][name]:13.2f} {phases['in the kernel'][name]:21.2f}")
    ratio = phases["forked"]["total"] / own
    print(f"  the same notebooks as graded (answers, visible and hidden tests) run top to bottom in a plain "
          f"kernel: {own:.2f} s of cells (kernel start not counted); cells that raised there: "
          f"{phases['plain'].get('cells that raised', 0)} (a baseline only at 0)")
    verdict = 'ok' if ratio <= 1.5 else 'OVER TARGET'
    print(f"  grading / the notebook's own cells: {ratio:.2f} (target <= 1.5: {verdict}); with the judge in the "
          f"worker's process (COURSE_JUDGE_BOX=off, before the box): "
          f"{phases['judge in the worker']['total'] / own:.2f}; with the checks in the kernel (COURSE_JUDGE=off): "
          f"{phases['in the kernel']['total'] / own:.2f}")
    print("  per notebook, grading / own cells: as graded (judge boxed), judge in the worker (before), checks in "
          "the kernel")
    for name, row in sorted(phases.get("per notebook", {}).items()):
        print(f"    {name:24s} {row['forked'] / row['plain']:5.2f}   {row['judge in the worker'] / row['plain']:5.2f}"
              f"   {row['in the kernel'] / row['plain']:5.2f}   (own cells, summed over the students: "
              f"{row['plain']:.2f} s)")


def catalogue_figures(repo: Repo, timeout: int = 20) -> dict[str, dict[str, float]]:
    """The own and the outside catalogue graded through the real path (fairness.py), figures apart."""
    from quality.fairness import figures, grade_catalogue

    with tempfile.TemporaryDirectory(prefix="tc-catalogue-") as tmp:
        found, collateral = grade_catalogue(repo, Path(tmp), timeout=timeout)
    numbers = {origin: figures(found, origin) for origin in ("own", "outside")}
    numbers["own"]["points lost by exercises next to a mistake"] = len(collateral)
    return numbers


def time_mha(repo: Repo, repeats: int = 10) -> dict[str, float]:
    """Median seconds of forward+backward: the reference MultiHeadAttention against
    nn.MultiheadAttention with the same weights (B=32, L=128, D=512, h=8), interleaved."""
    sys.path.insert(0, str(repo.reference))
    from course_reference.nb03_multi_head import MultiHeadAttention

    batch, length, d_model, heads = 32, 128, 512, 8
    torch.manual_seed(0)
    ours = MultiHeadAttention(d_model, heads)
    theirs = torch.nn.MultiheadAttention(d_model, heads, batch_first=True)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        theirs.out_proj.weight.copy_(ours.w_o.weight)
        theirs.out_proj.bias.copy_(ours.w_o.bias)
    x = torch.randn(batch, length, d_model)
    runs = {
        "reference MultiHeadAttention (per-head weights)": lambda: ours(x, x, x),
        "nn.MultiheadAttention, need_weights=True, per head": lambda: theirs(
            x, x, x, need_weights=True, average_attn_weights=False),
        "nn.MultiheadAttention, need_weights=False (fused)": lambda: theirs(x, x, x, need_weights=False),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for i in range(repeats + 2):
        for name, run in runs.items():
            start = time.perf_counter()
            run()[0].sum().backward()
            if i >= 2:  # two warm-up rounds
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def _model_figures(repo: Repo, train: bool) -> None:
    """Solution run times, attention and training throughput, and notebook 07's recorded run."""
    print("\nSolution notebooks, executed top to bottom (target <= 30 s each):")
    for name, seconds in time_solutions(repo):
        print(f"  {name:28s} {seconds:6.1f} s  {'ok' if seconds <= 30 else 'OVER TARGET'}")
    print("\nMulti-head attention forward+backward, B=32, L=128, D=512, h=8 (median of 10, CPU):")
    mha = time_mha(repo)
    base = mha["nn.MultiheadAttention, need_weights=True, per head"]
    for name, seconds in mha.items():
        print(f"  {name:52s} {seconds * 1000:7.1f} ms  ratio to nn (same outputs) {seconds / base:.2f}")
    ratio = mha["reference MultiHeadAttention (per-head weights)"] / base
    verdict = "ok" if ratio <= 1.1 else "OVER TARGET"
    print(f"  reference / nn.MultiheadAttention: {ratio:.2f} (target <= 1.1: {verdict})")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"\nTraining throughput, target tokens/s (forward+backward+Adam step, {device}, interleaved):")
    throughput = time_training_throughput(repo, device=device)
    for name, rate in throughput.items():
        print(f"  {name:28s} {rate:9.0f} tokens/s")
    ratio = throughput["reference Transformer"] / throughput["nn.Transformer (same size)"]
    print(f"  reference / nn.Transformer: {ratio:.2f} (target >= 0.9: {'ok' if ratio >= 0.9 else 'UNDER TARGET'})")
    if train:
        import nbformat

        from transformer_course.course.build import run_solution as run

        nb = run(repo.assignment("07_training"))
        nbformat.write(nb, repo.solutions / "07_training.ipynb")
    print("\nNotebook 07, BLEU against time (from solutions/07_training.ipynb):")
    for line in recorded_training(repo):
        print(f"  {line.strip()}")


def time_sandbox(repo: Repo, timeout: int = 60, rounds: int = 2) -> dict[str, float]:
    """Seconds per notebook grading the seven solutions in one process, with and without the
    sandbox, interleaved (off, on, off, on, ...) so that both see the same machine."""
    from transformer_course.grading.kernel import sandbox
    from transformer_course.grading.run.batch import grade_class

    if sandbox.bwrap() is None:
        return {}
    times: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="tc-bench-sandbox-") as tmp:
        submitted = Path(tmp) / "submitted"
        for assignment in repo.assignments():
            target = submitted / "solutions" / assignment.name
            target.mkdir(parents=True)
            shutil.copyfile(repo.solutions / f"{assignment.notebook}.ipynb", target / f"{assignment.notebook}.ipynb")
        n = len(repo.assignments())
        for index in range(rounds):
            for mode in ("off", "on"):
                with environ(COURSE_SANDBOX=mode):
                    start = time.perf_counter()
                    grade_class(submitted, Path(tmp) / f"out-{mode}-{index}", repo, timeout=timeout, progress=False,
                                workers=1)
                    times[mode].append((time.perf_counter() - start) / n)
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    return {"without (s per notebook)": off, "with (s per notebook)": on, "ratio": on / off}


def attack_figures(repo: Repo, timeout: int = 60) -> dict[str, tuple[int, int, list[str]]]:
    """The attacks of ``attacks.py`` graded through the real path, by class: (defended, of how many, what failed)."""
    from quality import attacks
    from transformer_course.grading.judging import judge_box
    from transformer_course.grading.run.batch import grade_class

    def count(folder: Path, why: Callable[[Any, Path], str], assignment: Callable[[str], str]) -> tuple:
        """Grade the class in ``folder``/in; ``why(result, its autograded notebook)`` says what failed."""
        out = folder / "out"
        results = [r for r in grade_class(folder / "in", out, repo, timeout=timeout, progress=False, memory_mb=2000)
                   if r.assignment == assignment(r.student_id)]
        failed = [f"{r.student_id}: {reason}" for r in results if (reason := why(r, out / "nbgrader" / "autograded"
                  / r.student_id / r.assignment / f"{repo.assignment(r.assignment).notebook}.ipynb"))]
        return len(results) - len(failed), len(results), failed

    def scores(r: Any) -> dict[str, float]:
        return {e.exercise: e.score for e in r.exercises}

    figures = {}
    with tempfile.TemporaryDirectory(prefix="tc-bench-attacks-") as tmp:
        attacks.write_class(repo, Path(tmp) / "answers" / "in")
        figures["from answer cells (notebook 01)"] = count(
            Path(tmp) / "answers", lambda r, _: attacks.verdict(
                r.student_id, scores(r), " ".join([r.reason] + [e.feedback for e in r.exercises])),
            lambda _: attacks.A01)
        attacks.write_lent_class(repo, Path(tmp) / "lent" / "in")
        figures["through the grader's lent objects (notebooks 05, 07)"] = count(
            Path(tmp) / "lent", lambda r, nb: attacks.lent_verdict(
                repo, r.student_id, scores(r), " ".join(e.feedback for e in r.exercises),
                nb.read_text() if nb.is_file() else ""),
            lambda student: attacks.lent_cases()[student][0])
        if judge_box.enabled():
            why = attacks.compromised_judge(repo, Path(tmp) / "judge")
            figures["a compromised judge (notebook 05, its box)"] = (int(not why), 1, [why] if why else [])
    return figures


def similarity_figures(repo: Repo) -> None:
    """The similarity report on its test class (copiers.py): copiers flagged and honest pairs flagged,
    at the default threshold and around it (the measurement the default rests on)."""
    from quality import copiers
    from transformer_course.instructors import similarity

    stubs, solutions, assignment_of = similarity.course_cells(repo)
    report = similarity.compare(copiers.test_class(solutions), stubs, solutions, assignment_of)
    print(f"\nSimilarity report on its test class (copiers.py: honest = both catalogues' correct variants; copiers "
          f"= the published solution or a classmate renamed, commented, reordered), minimum length "
          f"{similarity.MIN_CHARS} characters:")
    for threshold in (0.6, 0.7, similarity.THRESHOLD, 0.8, 0.9):
        numbers = copiers.figures(report, threshold)
        mark = " (default)" if threshold == similarity.THRESHOLD else ""
        print(f"  threshold {threshold:.2f}{mark}: copiers of the solution flagged "
              f"{numbers['copiers of the solution flagged (%)']:.1f}% of {numbers['copiers of the solution']}, of a "
              f"classmate {numbers['copiers of a classmate flagged (%)']:.1f}% of {numbers['copiers of a classmate']} "
              f"(target 100%); independent honest pairs flagged {numbers['independent honest pairs flagged']} of "
              f"{numbers['independent honest pairs']} (target 0); own-catalogue variant pairs flagged "
              f"{numbers['own-catalogue variant pairs flagged']} of "
              f"{numbers['own-catalogue variant pairs (a shared head)']}")
    print(f"  exercises compared {numbers['exercises compared']}, below the minimum length (skipped) "
          f"{numbers['exercises below the minimum length (skipped)']}: {', '.join(sorted(report.skipped))}")
    answers, copied_from = copiers.student_class(solutions)
    report = similarity.compare(answers, stubs, solutions, assignment_of)
    print("\nSimilarity by student on the class of whole students (copiers.student_class: notebooks 01-06, the four "
          "independent authors and the outside catalogue honest; copiers of the solution or a classmate, each with "
          "one disguise: verbatim, renamed, commented, reordered, rewritten spellings, a helper extracted, all at "
          "once, half the exercises):")
    for threshold in (0.5, similarity.STUDENT_THRESHOLD, 0.7):
        n = copiers.class_figures(report, copied_from, threshold)
        mark = " (default)" if threshold == similarity.STUDENT_THRESHOLD else ""
        print(f"  evidence {threshold:.2f}{mark}: copiers grouped with their source "
              f"{n['copiers named with their source']} of {n['copiers']}; copied (student, exercise) pairs flagged "
              f"{n['copied pairs flagged (%)']:.1f}% of "
              f"{n['copied (student, exercise) pairs']} (standing out on their own "
              f"{n['copied pairs standing out (%)']:.1f}%); honest (student, source) pairs flagged "
              f"{n['honest pairs flagged']} of {n['honest (student, source) pairs']}")
    print(f"  highest honest evidence {n['highest honest evidence']:.2f}, lowest copier evidence "
          f"{n['lowest copier evidence']:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m quality.bench", description=__doc__)
    parser.add_argument("--skip-grading", action="store_true", help="skip the catalogue and class grading")
    parser.add_argument("--grading-only", action="store_true", help="only the catalogue and class grading")
    parser.add_argument("--sandbox-only", action="store_true", help="only the sandbox's overhead and the attacks")
    parser.add_argument("--check-only", action="store_true", help="only `check` against the notebooks' own cells")
    parser.add_argument("--hostile-only", action="store_true",
                        help="only the hostile class (memory, tables, honest rows) and the long hypothesis profile")
    parser.add_argument("--class-only", action="store_true",
                        help="only a class of 30 graded by serial nbgrader autograde and by ours (~60 min)")
    parser.add_argument("--lms-only", action="store_true",
                        help="only a Canvas push of 300 students x 8 assignments to a local Canvas (lms_bench.py)")
    parser.add_argument("--lti-only", action="store_true",
                        help="only an LTI 1.3 push of 300 students x 8 assignments to a local platform (lti_bench.py)")
    parser.add_argument("--students", type=int, default=30, help="with --class-only: the class's size (default 30)")
    parser.add_argument("--record", type=Path,
                        help="with --check-only or --class-only: also write its figures to this JSON file")
    parser.add_argument("--train", action="store_true",
                        help="re-run notebook 07 with its automatic configuration (~12 min on a CPU)")
    args = parser.parse_args(argv)
    repo = Repo()
    repo.prefer_shared_multi30k()
    if args.lms_only:
        from quality import lms_bench

        return lms_bench.main()
    if args.lti_only:
        from quality import lti_bench

        return lti_bench.main()
    if args.hostile_only:
        return hostile.main()
    if args.check_only:
        rows = time_check(repo)
        print_check(rows)
        if args.record:
            _record(args.record, {"rows": [{"notebook": n, "check": round(w, 2), "from nothing": round(c, 2),
                                            "own cells": round(o, 2), "same table": same}
                                           for n, w, c, o, same in rows]})
        return 0
    if args.class_only:
        figures = print_class(time_grading(repo, students=args.students))
        if args.record:
            _record(args.record, figures)
        return 0
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, "
          f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}")
    if args.sandbox_only or not args.skip_grading:
        box = time_sandbox(repo)
        print("\nThe grading sandbox (bubblewrap), the 7 solution notebooks graded in one process, median of 2:")
        if box:
            print(f"  without: {box['without (s per notebook)']:.2f} s per notebook; with: "
                  f"{box['with (s per notebook)']:.2f} s; ratio {box['ratio']:.2f}")
        else:
            print("  not measured: bubblewrap is not installed (`make sandbox`)")
        print("\nAttacks on the grader (quality/attacks.py), by class:")
        for kind, (defended, total, failed) in attack_figures(repo).items():
            print(f"  {kind}: {defended} of {total} defended")
            for line in failed:
                print(f"    NOT DEFENDED {line}")
        if args.sandbox_only:
            return 0
    similarity_figures(repo)
    if not args.grading_only:
        _model_figures(repo, args.train)
    if args.skip_grading:
        return 0
    targets = {"correct variants at full marks (%)": ">= 100", "mistakes caught (%)": ">= 100",
               "mistakes named in feedback (%)": ">= 90"}
    for origin, numbers in catalogue_figures(repo).items():
        where = ("catalogue/, with a source address: adapted from public implementations and their issues"
                 if origin == "outside" else "catalogue/, source: own")
        print(f"\nThe {origin} catalogue through the real grading path ({where}):")
        for name, value in numbers.items():
            target = targets.get(name)
            verdict = "" if target is None else (
                f"(target {target}%: {'ok' if value >= float(target.split()[1]) else 'UNDER TARGET'})")
            print(f"  {name:48s} {value:7.1f} {verdict}")
    print_breakdown(grading_breakdown(repo))
    print_check(time_check(repo))
    print_class(time_grading(repo))
    return hostile.main()


def _record(path: Path, figures: dict) -> None:
    """Write a run's ``figures`` to ``path`` (JSON), with the date, the cores and torch's version."""
    path.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(),
                               "torch": torch.__version__, **figures}, indent=1) + "\n")


def print_class(g: dict[str, float]) -> dict[str, float]:
    """Print :func:`time_grading`'s figures; returns them."""
    n = g["notebooks"]
    serial, parallel = g["serial nbgrader autograde (s)"], g["transformer-course grade (s)"]
    print(f"\nGrading a class of {g['students']} students x {n // g['students']} notebooks ({n} notebooks), "
          f"{os.cpu_count()} cores:")
    print(f"  serial nbgrader autograde              : {serial:7.1f} s  ({serial / n:.2f} s per notebook)")
    print(f"  transformer-course grade (parallel, + feedback, CSVs, gradebook): {parallel:7.1f} s  "
          f"({parallel / n:.2f} s per notebook)")
    first = g.get("first run of one student, limits measured where they were not (s)")
    if first is not None:
        print(f"  before it, untimed: one student's {n // g['students']} notebooks graded, which measures the "
              f"solutions' cell limits where this machine had none for this grader (once per machine and grader "
              f"version): {first:.1f} s")
    speedup = serial / parallel
    print(f"  speed-up: {speedup:.2f}x (target >= 2.5x: {'ok' if speedup >= 2.5 else 'UNDER TARGET'}); "
          f"identical per-cell scores: {g['identical']} of {g['compared']} notebooks")
    return g


if __name__ == "__main__":
    sys.exit(main())
