"""``make compat``: the seven solution notebooks, executed under other versions of torch.

The course pins torch 2.13.0; students on Colab or their own machines have other versions.
For each version given, this makes a virtual environment ``.venv-compat/torch-<version>-py<python>``
with that torch and the packages the notebooks import, at this project's pins (read from
pyproject.toml), registers it as a Jupyter kernel, and runs every solution notebook top to
bottom in it (notebook 07 with its one-minute ``tiny`` configuration). A solution notebook
carries its visible tests, which compare the student-facing functions with PyTorch's own
(``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``, ...), so a run that passes
means the course's code and its claims hold under that torch.

Where PyTorch's CPU index cannot be reached, torch comes from the default index: a CUDA
build with its CUDA packages (about 6 GB per environment; it runs on the CPU all the same).

Exit status: 0 when every notebook ran under every version; 1 when a notebook failed;
2 when an environment could not be installed (and no notebook failed); with
``--not-installed-ok`` that case says so and exits 0 (CI: a registry outage is no fault of the course's).

    python scripts/compat.py 2.6.0 2.14.1 [--python /path/to/python3.12]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from transformer_course.course.build import convert_sources, run_solution
from transformer_course.grading.notebook.workarea import environ
from transformer_course.layout import Repo

# What the notebooks import (the kernel's side); the grader's packages are not needed there.
KERNEL_PACKAGES = ["numpy", "matplotlib", "seaborn", "tqdm", "sacrebleu", "sentencepiece", "ipykernel"]
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours of a kernel's traceback
NEEDED_GB = 7  # a CUDA build of torch with its CUDA packages: 6.0 GB measured for 2.14.1


class InstallError(RuntimeError):
    """An environment could not be set up (a registry unreachable, a version not published)."""


def pins(repo: Repo) -> list[str]:
    """``name==version`` of KERNEL_PACKAGES, as pyproject.toml pins them."""
    deps = tomllib.loads((repo.root / "pyproject.toml").read_text())["project"]["dependencies"]
    found = {re.split(r"[=<>!~ ]", d, maxsplit=1)[0].lower(): d for d in deps}
    return [found[name] for name in KERNEL_PACKAGES]


def _pip(folder: Path, *args: str) -> subprocess.CompletedProcess:
    # No cache: the environment is kept, so a second copy of each wheel would only take disk.
    return subprocess.run([str(folder / "bin" / "python"), "-m", "pip", "--disable-pip-version-check",
                           "install", "--quiet", "--no-cache-dir", *args], capture_output=True, text=True)


def environment(repo: Repo, version: str, python: str) -> tuple[str, Path]:
    """The kernel name and folder of a ready environment with torch ``version``.

    Raises:
        InstallError: with pip's last lines, when torch or a pinned package cannot be installed.
    """
    try:
        python_version = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                        capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise InstallError(f"no working Python at {python!r} ({exc})") from exc
    name = f"torch-{version}-py{python_version}"
    folder = repo.root / ".venv-compat" / name
    packages = pins(repo)
    ready = folder / ".ready"  # what it was made with: a different Python, pin or place makes it anew
    made_with = "\n".join([python, str(folder), *packages])
    if ready.exists() and ready.read_text() == made_with:
        return name, folder
    shutil.rmtree(folder, ignore_errors=True)
    free = shutil.disk_usage(repo.root).free / 1e9
    if free < NEEDED_GB:
        raise InstallError(f"an environment takes up to {NEEDED_GB:.0f} GB; {free:.1f} GB free")
    subprocess.run([python, "-m", "venv", str(folder)], check=True)
    for attempt in (("--index-url", TORCH_INDEX, "--retries", "1", "--timeout", "20", f"torch=={version}"),
                    (f"torch=={version}",)):
        done = _pip(folder, *attempt)
        if done.returncode == 0:
            break
    else:
        raise InstallError(f"torch=={version}: " + " ".join(done.stderr.split()[-40:]))
    done = _pip(folder, *packages)  # none of them depends on torch: the one above stays
    if done.returncode != 0:
        raise InstallError(" ".join(packages) + ": " + " ".join(done.stderr.split()[-40:]))
    subprocess.run([str(folder / "bin" / "python"), "-m", "ipykernel", "install", "--prefix", str(folder),
                    "--name", name, "--display-name", f"Python {python_version} (torch {version})"],
                   check=True, capture_output=True)
    ready.write_text(made_with)
    return name, folder


def _size_gb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink()) / 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="+", help="torch versions, e.g. 2.6.0 2.14.1")
    parser.add_argument("--python", default=sys.executable, help="Python for the environments (default: this one)")
    parser.add_argument("--not-installed-ok", action="store_true",
                        help="report an environment that cannot be installed (no registry, no disk) but exit 0")
    args = parser.parse_args(argv)
    repo = Repo()
    repo.prefer_shared_multi30k()  # notebook 07 reads the shared copy beside the checkout, as the tests do
    assignments = convert_sources(repo)
    failed, not_installed = [], []
    for version in args.versions:
        start = time.perf_counter()
        try:
            kernel, folder = environment(repo, version, args.python)
        except InstallError as exc:
            print(f"torch {version}: could not be installed: {exc}", flush=True)
            not_installed.append(version)
            continue
        found = subprocess.run([str(folder / "bin" / "python"), "-c", "import sys, torch; print(torch.__version__, "
                                "sys.version.split()[0])"], capture_output=True, text=True, check=True).stdout.split()
        print(f"torch {found[0]} on Python {found[1]} (environment ready in {time.perf_counter() - start:.0f} s, "
              f"{_size_gb(folder):.1f} GB):", flush=True)
        with environ(JUPYTER_PATH=str(folder / "share" / "jupyter")):
            for assignment in assignments:
                start = time.perf_counter()
                try:
                    run_solution(assignment, train_config="tiny", kernel_name=kernel)
                    verdict = "ok"
                except Exception as exc:  # noqa: BLE001 (report every notebook, then fail)
                    verdict = "FAILED: " + " ".join(ANSI.sub("", str(exc)).split())[-400:]
                    failed.append(f"torch {version} {assignment.name}")
                print(f"  {assignment.name:24s} {time.perf_counter() - start:6.1f} s  {verdict}", flush=True)
    if failed:
        print("failed: " + ", ".join(failed))
        return 1
    if not_installed:
        print("not installed (nothing ran under it): torch " + ", ".join(not_installed))
        return 0 if args.not_installed_ok else 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
