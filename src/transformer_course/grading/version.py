"""The grader's version: what a record, or a machine's measured limits, were made with."""

from __future__ import annotations

import hashlib
from pathlib import Path

from transformer_course import __version__
from transformer_course.layout import Repo


def grader_version(repo: Repo, *limits: float) -> str:
    """Changes whenever anything that decides a grade changes: checks, reference, sources, limits,
    and the grader's own code (this package)."""
    digest = hashlib.sha256(f"{__version__}|{'|'.join(map(str, limits))}".encode())
    files = sorted(repo.reference.rglob("*.py")) + sorted(p for p in repo.source.rglob("*")
                                                          if p.is_file() and p.suffix in (".py", ".json"))
    package = Path(__file__).resolve().parents[1]  # transformer_course, every subpackage
    for path in files:
        if "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(repo.root)).encode() + b"\0" + path.read_bytes())
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]
