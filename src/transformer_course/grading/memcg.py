"""A memory cgroup around a sandbox: a limit on everything its processes hold, files in its tmpfs included.

A kernel's own limit (``RLIMIT_DATA``, set by the guard) counts its private data only: pages of shared
memory (``mmap`` of ``MAP_SHARED``, files in the sandbox's ``/tmp`` and ``/dev/shm``) escape it. The
kernel cgroup counts every page charged to its processes, so a sandbox (the worker's kernel template and
the kernel it forks, or the judges' template and its judge) started inside one cannot hold more than its
limit: past it, the kernel's OOM killer ends a process of that sandbox, never one of the grader's.

Where the machine offers no writable memory controller (cgroup v1's ``memory`` hierarchy, or v2 with the
``memory`` controller delegated to this process's group), :func:`create` returns None and the grader says
so in its first line (:func:`status`); the tmpfs sizes and ``RLIMIT_DATA`` still hold.
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PREFIX = "tc-sandbox-"


@functools.cache
def _parent() -> tuple[Path | None, str]:
    """(folder under which this process may create memory cgroups, "v1" | "v2"), or (None, why)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None, "no /proc/self/cgroup"
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            folder = ROOT / "memory" / path.lstrip("/")
            if (folder / "memory.limit_in_bytes").exists() and os.access(folder, os.W_OK):
                return folder, "v1"
    for line in lines:
        if line.startswith("0::"):
            folder = ROOT / line[3:].lstrip("/")
            enabled = folder / "cgroup.subtree_control"
            with contextlib.suppress(OSError):
                if "memory" in enabled.read_text().split() and os.access(folder, os.W_OK):
                    return folder, "v2"
    return None, "no writable memory cgroup here"


def status() -> str:
    """How sandboxes' memory is bounded here, in a few words for the grader's first line."""
    folder, version = _parent()
    return f"a memory cgroup ({version}) per sandbox" if folder else f"no memory cgroup ({version})"


def create(limit_bytes: int) -> Path | None:
    """A new memory cgroup of at most ``limit_bytes`` (swap not counted) under this process's own, or None
    where there is none to be had. Groups left by processes that are gone are removed first."""
    folder, version = _parent()
    if folder is None or limit_bytes <= 0:
        return None
    for old in folder.glob(f"{PREFIX}*"):
        pid = old.name.removeprefix(PREFIX).split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            remove(old)
    group = folder / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / ("memory.limit_in_bytes" if version == "v1" else "memory.max")).write_text(str(limit_bytes))
        if version == "v2":
            (group / "memory.swap.max").write_text("0")
    except OSError:
        remove(group)
        return None
    return group


def join(group: Path) -> None:
    """Move the calling process into ``group`` (for ``Popen(preexec_fn=...)``: before the sandbox's
    first process runs, so that everything it starts is counted)."""
    with open(group / "cgroup.procs", "w") as f:
        f.write("0")


def remove(group: Path | None) -> None:
    """Remove ``group`` once its processes are gone (a cgroup's files cannot be deleted, only the folder)."""
    if group is None:
        return
    with contextlib.suppress(OSError):  # still holding processes: left for the next start's clean-up
        group.rmdir()
