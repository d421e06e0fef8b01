"""``make compat``: the seven solution notebooks, executed under other versions of torch.

The course pins torch 2.13.0; students on Colab or their own machines have other versions.
For each version given, this makes a virtual environment ``.venv-compat/torch-<version>``
with that torch (CPU build) and the packages the notebooks import, at this project's pins
(read from pyproject.toml), registers it as a Jupyter kernel, and runs every solution
notebook top to bottom in it (notebook 07 with its one-minute ``tiny`` configuration).
Exit status 1 when any notebook fails under any version.

    python scripts/compat.py 2.6.0 2.14.1 [--python python3.12]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
import tomllib

from transformer_course.build import convert_sources, run_solution
from transformer_course.layout import Repo
from transformer_course.nbgrader_setup import environ

# What the notebooks import (the kernel's side); the grader's packages are not needed there.
KERNEL_PACKAGES = ["numpy", "matplotlib", "seaborn", "tqdm", "sacrebleu", "sentencepiece", "ipykernel"]
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def pins(repo: Repo) -> list[str]:
    """``name==version`` of KERNEL_PACKAGES, as pyproject.toml pins them."""
    deps = tomllib.loads((repo.root / "pyproject.toml").read_text())["project"]["dependencies"]
    found = {re.split(r"[=<>!~ ]", d, maxsplit=1)[0].lower(): d for d in deps}
    return [found[name] for name in KERNEL_PACKAGES]


def environment(repo: Repo, version: str, python: str) -> str:
    """The kernel name of a ready environment with torch ``version``."""
    folder = repo.root / ".venv-compat" / f"torch-{version}"
    bin_dir = folder / "bin"
    pip = [str(bin_dir / "python"), "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]
    if not (bin_dir / "python").exists():
        subprocess.run([python, "-m", "venv", str(folder)], check=True)
    if subprocess.run([*pip, "--index-url", TORCH_INDEX, f"torch=={version}"]).returncode != 0:
        subprocess.run([*pip, f"torch=={version}"], check=True)  # PyTorch's index not reachable
    subprocess.run([*pip, *pins(repo)], check=True)
    name = f"torch-{version}"
    subprocess.run([str(bin_dir / "python"), "-m", "ipykernel", "install", "--prefix", str(folder), "--name", name,
                    "--display-name", f"Python (torch {version})"], check=True, capture_output=True)
    return name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="+", help="torch versions, e.g. 2.6.0 2.14.1")
    parser.add_argument("--python", default=sys.executable, help="Python for the environments (default: this one)")
    args = parser.parse_args(argv)
    repo = Repo()
    failed = []
    for version in args.versions:
        kernel = environment(repo, version, args.python)
        folder = repo.root / ".venv-compat" / f"torch-{version}"
        found = subprocess.run([str(folder / "bin" / "python"), "-c", "import sys, torch; print(torch.__version__, "
                                "sys.version.split()[0])"], capture_output=True, text=True, check=True).stdout.split()
        print(f"torch {found[0]} on Python {found[1]}:")
        with environ(JUPYTER_PATH=str(folder / "share" / "jupyter")):
            for assignment in convert_sources(repo):
                start = time.perf_counter()
                try:
                    run_solution(assignment, train_config="tiny", kernel_name=kernel)
                    verdict = "ok"
                except Exception as exc:  # noqa: BLE001 (report every notebook, then fail)
                    verdict = f"FAILED: {' '.join(str(exc).split())[-300:]}"
                    failed.append(f"torch {version} {assignment.name}")
                print(f"  {assignment.name:24s} {time.perf_counter() - start:6.1f} s  {verdict}", flush=True)
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
