"""``make bench``: figures, not tests. Prints seconds and ratios measured in one run.

- seconds to execute each solution notebook (target <= 30 s on 2 CPU cores);
- seconds per notebook for ``transformer-course grade`` against bare ``nbgrader autograde``
  (nbgrader's own CLI: generate_assignment + autograde, no feedback) on the same
  submissions, and their ratio (target <= 1.2).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from .build import convert_sources, run_solution
from .layout import Repo
from .nbgrader_setup import reference_on_path, tools_on_path

# Students of the sample class whose notebooks run to the end (no endless loop, no crash):
# the comparison is about grading overhead, not about waiting out a timeout.
BENCH_STUDENTS = ["ada", "ben", "cho", "dev", "eun", "fay", "jon"]


def time_solutions(repo: Repo) -> list[tuple[str, float]]:
    rows = []
    for assignment in convert_sources(repo):
        start = time.perf_counter()
        run_solution(assignment)
        rows.append((assignment.name, time.perf_counter() - start))
    return rows


def _copy_class(repo: Repo, target: Path) -> int:
    count = 0
    for student in BENCH_STUDENTS:
        shutil.copytree(repo.sample_class / student, target / student)
        count += sum(1 for _ in (target / student).rglob("*.ipynb"))
    return count


def time_grading(repo: Repo, timeout: int = 30) -> tuple[int, float, float]:
    """(notebooks, seconds for transformer-course grade, seconds for bare nbgrader)."""
    bin_dir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory(prefix="tc-bench-") as tmp:
        tmp = Path(tmp)
        notebooks = _copy_class(repo, tmp / "submitted")
        start = time.perf_counter()
        subprocess.run([str(bin_dir / "transformer-course"), "grade", str(tmp / "submitted"),
                        "--out", str(tmp / "ours"), "--timeout", str(timeout)],
                       check=True, capture_output=True, cwd=repo.root)
        ours = time.perf_counter() - start

        # Bare nbgrader: its own course root, the same config file, the same submissions.
        bare = tmp / "bare"
        bare.mkdir()
        shutil.copytree(tmp / "submitted", bare / "submitted")
        (bare / "nbgrader_config.py").write_text(
            "from pathlib import Path\n"
            "from transformer_course.layout import Repo\n"
            "from transformer_course.nbgrader_setup import make_config\n"
            f"c.merge(make_config(Path({str(bare)!r}), Repo(Path({str(repo.root)!r})), {timeout}))\n"
        )
        nbgrader = str(bin_dir / "nbgrader")
        tools_on_path()
        start = time.perf_counter()
        with reference_on_path(repo):
            env = dict(os.environ)
        for assignment in repo.assignments():
            for command in (["generate_assignment", assignment.name, "--force"],
                            ["autograde", assignment.name, "--create", "--force"]):
                subprocess.run([nbgrader, *command], check=True, capture_output=True, cwd=bare, env=env)
        bare_seconds = time.perf_counter() - start
    return notebooks, ours, bare_seconds


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_course.bench", description=__doc__)
    parser.add_argument("--skip-grading", action="store_true", help="only time the solution notebooks")
    args = parser.parse_args(argv)
    repo = Repo()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, "
          f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}")
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
    if args.skip_grading:
        return 0
    notebooks, ours, bare = time_grading(repo)
    print(f"\nGrading {notebooks} sample-class notebooks ({len(BENCH_STUDENTS)} students):")
    print(f"  bare nbgrader generate_assignment + autograde : {bare:6.1f} s  "
          f"({bare / notebooks:.2f} s per notebook)")
    print(f"  transformer-course grade (+ feedback, CSVs)   : {ours:6.1f} s  "
          f"({ours / notebooks:.2f} s per notebook)")
    ratio = ours / bare
    print(f"  ratio ours / bare: {ratio:.2f}  (target <= 1.2: {'ok' if ratio <= 1.2 else 'OVER TARGET'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
