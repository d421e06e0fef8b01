"""Writes that a reader (or a crash) never sees half done."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write ``path`` so that readers see the old file or the whole new one, never a part. The file's
    mode is what the user's umask gives a new file (as ``open`` would), not the temporary file's
    owner-only 0600: a teaching assistant, or a web server handing back pages, can read it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as f:
        try:
            os.chmod(f.fileno(), 0o666 & ~_umask())
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        except BaseException:  # a full disk, Ctrl-C: no half-written temporary file is left behind
            with contextlib.suppress(OSError):
                os.unlink(f.name)
            raise
    try:
        os.replace(f.name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(f.name)
        raise


def _umask() -> int:
    """This process's umask (read by setting it, then putting it back: there is no other way)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
