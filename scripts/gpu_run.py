"""Run the training notebooks' solutions (07, 08) top to bottom on a GPU, in the `gpu` configuration.

    python scripts/gpu_run.py [--minutes M] [--parallel] [--out DIR] [NAME ...]

Each solution notebook's code cells run as one Python script (a GPU machine often has PyTorch but no
Jupyter), in a scratch folder holding the files students get beside it, with
``COURSE_TRAIN_CONFIG=gpu``; its output goes to ``DIR/NAME.log`` and its figures to ``DIR/NAME-figures/``.
``--minutes`` shortens each training budget (``COURSE_TRAIN_MINUTES``); ``--parallel`` runs the notebooks
at the same time (the figures of each then share the GPU: say so where they are reported). The lines
that `docs/benchmarks.md`'s GPU rows quote are printed at the end (``make gpu`` runs this after
``make build``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["07_training", "08_modern_decoder"]
# Lines of the notebooks' output that the GPU rows of docs/benchmarks.md quote.
QUOTED = re.compile(r"^(configuration|model:|trained |kept |the mean of|test_2016_flickr|val, |chosen on|\s+val:|"
                    r"\s+test_2016_flickr:|stopping early|\d+ test sentences|Notice: here the cache|"
                    r"step \d+ \(epoch|epoch \d+[: ]|\| |.*perplexity|.*tokens/s|.*ms\b|.*MiB)")

PREAMBLE = """\
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as _plt
_shown = [0]
def _show(*args, **kwargs):  # each figure to a file instead of a window
    for number in _plt.get_fignums():
        _shown[0] += 1
        _plt.figure(number).savefig({figures!r} + f"/figure{{_shown[0]:02d}}.png", dpi=90)
    _plt.close("all")
_plt.show = _show
"""


def script(notebook: Path, figures: Path) -> str:
    """The notebook's code cells as one script, after a preamble that saves figures to ``figures``."""
    cells = json.loads(notebook.read_text())["cells"]
    code = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in cells if c["cell_type"] == "code"]
    return PREAMBLE.format(figures=str(figures)) + "\n\n".join(f"# cell {i}\n{c}" for i, c in enumerate(code))


def start(name: str, source: Path, out: Path, minutes: float | None, config: str = "gpu",
          changes: str = "", threads: int | None = None) -> tuple[subprocess.Popen, Path]:
    """Start one notebook's run; returns the process and its log.

    ``name`` is a notebook, or ``NOTEBOOK-LABEL`` for a variant of it whose configuration differs by
    ``changes`` (``field=value,...``, as in ``dataclasses.replace``)."""
    notebook = name.split("-")[0]
    figures = out / f"{name}-figures"
    figures.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"gpu-{name}-"))
    for shipped in source.iterdir():  # the files students get beside the notebooks
        if shipped.suffix == ".py":
            shutil.copy(shipped, work / shipped.name)
    code = script(source / f"{notebook}.ipynb", figures)
    if changes:  # a variant: the configuration table's row, changed after it is chosen
        code = code.replace("CONFIG = CONFIGS[choice]\n", f"CONFIG = replace(CONFIGS[choice], {changes})\n", 1)
    (work / "run.py").write_text(code)
    # Its own HOME: each run caches its own tokenizer (runs at the same time would write the same file).
    env = dict(os.environ, COURSE_TRAIN_CONFIG=config, PYTHONUNBUFFERED="1", TQDM_DISABLE="1", HOME=str(work))
    env["PYTHONPATH"] = os.pathsep.join([str(work), str(ROOT / "autograder" / "reference"), env.get("PYTHONPATH", "")])
    if minutes is not None:
        env["COURSE_TRAIN_MINUTES"] = str(minutes)
    if threads:  # runs side by side, each with every core, made Part A's CPU tests 60x slower
        env["OMP_NUM_THREADS"] = str(threads)
    log = out / f"{name}.log"
    with log.open("w") as handle:
        process = subprocess.Popen([sys.executable, "-u", "run.py"], cwd=work, env=env, stdout=handle,
                                   stderr=subprocess.STDOUT)
    return process, log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=DEFAULT, help="solution notebooks to run (default: 07, 08)")
    parser.add_argument("--source", type=Path, default=ROOT / "solutions",
                        help="folder of the solution notebooks and the files beside them (default: solutions/)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu", help="where logs and figures go")
    parser.add_argument("--minutes", action="append", default=[], metavar="[NAME=]M",
                        help="training budget in minutes, for every notebook or for NAME (default: the notebook's)")
    parser.add_argument("--config", default="gpu", help="the training configuration (default: gpu; tiny to try it)")
    parser.add_argument("--variant", action="append", default=[], metavar="NOTEBOOK-LABEL:CHANGES",
                        help="also run a variant, e.g. 07_training-big:num_layers=6,d_ff=2048")
    parser.add_argument("--parallel", action="store_true", help="run the notebooks at the same time")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    began, failed = time.monotonic(), []
    budgets = dict(item.split("=", 1) if "=" in item else ("*", item) for item in args.minutes)
    runs = []
    jobs = [(name, "") for name in args.names] + [tuple(v.split(":", 1)) for v in args.variant]
    threads = max(1, (os.cpu_count() or 1) // len(jobs)) if args.parallel else None
    for name, changes in jobs:
        minutes = budgets.get(name.split("-")[0], budgets.get("*"))
        runs.append((name, *start(name, args.source, args.out, minutes and float(minutes), args.config, changes,
                                  threads)))
        if not args.parallel:
            runs[-1][1].wait()
    for name, process, log in runs:
        code = process.wait()
        print(f"== {name}: exit {code} after {time.monotonic() - began:.0f} s (log {log})")
        lines = log.read_text(errors="replace").splitlines()
        print("\n".join(line for line in lines if QUOTED.match(line)))
        if code:
            failed.append(name)
            print("\n".join(lines[-25:]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
