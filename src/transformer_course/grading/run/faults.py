"""Faults of the output folder (a full disk, a read-only or forbidden ``OUT``), said in one line.

A grading run that cannot write ``OUT`` stops at once (every further notebook would fail the
same way) with a line that says what happened, what was kept and how to go on. These helpers
tell such a fault from a grader bug, whatever wrapped it: an ``OSError``, SQLite's "database or
disk is full" from the gradebook, or nbgrader's log of a failed write.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

# errno -> what it means for the output folder
_ERRNOS = {errno.ENOSPC: "full", errno.EDQUOT: "full", errno.EROFS: "read-only",
           errno.EACCES: "denied", errno.EPERM: "denied"}
# the same faults as a message says them (SQLite, or nbgrader's log of a failed write)
_WORDS = (("no space left on device", "full"), ("disk quota exceeded", "full"), ("database or disk is full", "full"),
          ("read-only file system", "read-only"), ("readonly database", "read-only"),
          ("permission denied", "denied"), ("operation not permitted", "denied"))


@dataclass(frozen=True)
class Fault:
    """A fault of the storage: ``kind`` is "full", "read-only" or "denied"; ``path``, where known."""

    kind: str
    path: str = ""

    def what(self) -> str:
        """What happened, in words: "the disk is full (writing OUT/results/ada/01.json)"."""
        words = {"full": "the disk is full", "read-only": "the output folder is on a read-only file system",
                 "denied": "permission denied"}[self.kind]
        return words + (f" (writing {self.path})" if self.path else "")


def fault_of(error: BaseException | None, strict: bool = False) -> Fault | None:
    """The storage fault that ``error`` is or wraps (its causes and contexts too), else None.
    ``strict``: only an ``OSError``'s errno or SQLite's own error counts, not a message that
    quotes one (a grading worker's error may quote a student's notebook)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in _ERRNOS:
            return Fault(_ERRNOS[error.errno], str(error.filename or ""))
        text = str(error).lower()
        if isinstance(error, sqlite3.Error) or type(error).__module__.startswith("sqlalchemy") \
                or not strict and ("[errno" in text or "nbgrader" in text):
            for words, kind in _WORDS:
                if words in text:
                    return Fault(kind)
        error = error.__cause__ or error.__context__
    return None


def check_writable(out: Path) -> None:
    """Create ``out`` if needed and write (and remove) a small file in it, in a second.

    Raises:
        OSError: the folder cannot be written (read-only, full, forbidden).
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=out, prefix=".write-check.")
        try:
            os.write(fd, b"x" * 4096)
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(name)
    except OSError as exc:  # said of the folder, not of the probe's random name
        raise OSError(exc.errno, exc.strerror, str(out)) from None


def resume_hint(fault: Fault | None, out: str = "the output folder") -> str:
    """How to go on after the fault: the same command again, once its cause is gone."""
    if fault is None:
        return "run the same command again (with --debug for the traceback)"
    return {"full": "free some space, then run the same command again",
            "read-only": f"make {out} writable (or give another folder), then run the same command again",
            "denied": f"make {out} writable for you (or give another folder), then run the same command again",
            }[fault.kind]


def kept_line(progress: object, out: str) -> str:
    """What a stopped grading run kept, from its :class:`~.batch.Progress` (None: nothing known)."""
    pairs, kept, graded = (getattr(progress, k, 0) for k in ("pairs", "kept", "graded"))
    failed = getattr(progress, "failed", "")
    if not pairs:
        line = "nothing was graded"
    elif not kept:
        line = f"none of the {pairs} notebooks is graded yet"
    else:
        line = f"{kept} of {pairs} notebooks are graded and kept in {out}/results/"
        if graded != kept:
            line += f" ({graded or 'none'} of them by this run)"
    if failed:
        line += f"; {failed} could not be written and is graded again by the next run"
    return line
