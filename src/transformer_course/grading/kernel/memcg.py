"""Control groups around a sandbox: a limit on everything its processes hold, files in its tmpfs included,
and on how many processes (threads included) it may have at once.

A kernel's own limit (``RLIMIT_DATA``, set by the guard) counts its private data only: pages of shared
memory (``mmap`` of ``MAP_SHARED``, files in the sandbox's ``/tmp`` and ``/dev/shm``) escape it. The
kernel's memory cgroup counts every page charged to its processes, so a sandbox (the worker's kernel
template and the kernel it forks, or the judges' template and its judge) started inside one cannot hold
more than its limit: past it, the kernel's OOM killer ends a process of that sandbox, never one of the
grader's. Its pids cgroup (``pids.max``) refuses a fork past :data:`PROCESSES` tasks of the sandbox: a fork
bomb gets ``BlockingIOError`` (EAGAIN) from ``fork`` and the machine's other processes never notice.

Where the machine offers no writable memory controller (cgroup v1's ``memory`` hierarchy, or v2 with the
``memory`` controller delegated to this process's group), the tmpfs sizes and ``RLIMIT_DATA`` still hold.
Where it offers no writable pids controller, the sandbox's first process gets ``RLIMIT_NPROC``
(:func:`nproc_limit`) instead, which binds every user but root. The grader's first line says which
hold (:func:`status`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PREFIX = "tc-sandbox-"
# Tasks (processes and threads: the kernel counts both) one sandbox may hold at once: its template (a few
# threads), one kernel or judge (ipykernel's and ZeroMQ's threads, torch's thread pools: a few dozen), the
# processes a notebook starts on purpose (a pip run, a subprocess) and a margin for a machine with many cores.
PROCESSES = 512
# Tasks of this user that RLIMIT_NPROC leaves to the grader itself when a sandbox has reached its limit.
NPROC_HEADROOM = 1024


def _parent(controller: str, v1_file: str) -> tuple[Path | None, str]:
    """(folder under which this process may create groups of ``controller``, "v1" | "v2"), or (None, why).
    ``v1_file``: a file this process's group must have in ``controller``'s v1 hierarchy (a hierarchy's root
    group has no ``pids.max``, only ``cgroup.procs``)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None, "no /proc/self/cgroup"
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            folder = ROOT / controller / path.lstrip("/")
            if (folder / v1_file).exists() and os.access(folder, os.W_OK):
                return folder, "v1"
    for line in lines:
        if line.startswith("0::"):
            folder = ROOT / line[3:].lstrip("/")
            enabled = folder / "cgroup.subtree_control"
            with contextlib.suppress(OSError):
                if controller in enabled.read_text().split() and os.access(folder, os.W_OK):
                    return folder, "v2"
    return None, f"no writable {controller} cgroup here"


@functools.cache
def _memory_parent() -> tuple[Path | None, str]:
    return _parent("memory", "memory.limit_in_bytes")


@functools.cache
def _pids_parent() -> tuple[Path | None, str]:
    return _parent("pids", "cgroup.procs")


def status() -> str:
    """How sandboxes' memory is bounded here, in a few words for the grader's first line."""
    folder, version = _memory_parent()
    return f"a memory cgroup ({version}) per sandbox" if folder else f"no memory cgroup ({version})"


def process_status() -> str:
    """How many processes a sandbox may start here, in a few words for the grader's first line."""
    folder, version = _pids_parent()
    if folder is not None:
        return f"at most {PROCESSES} processes a sandbox (a pids cgroup, {version})"
    if os.getuid() == 0:
        return f"no process limit ({version}; RLIMIT_NPROC does not bind root)"
    return f"at most {PROCESSES} processes a sandbox (RLIMIT_NPROC: {version})"


@dataclass
class Group:
    """The cgroups of one sandbox: a memory group, a pids group, or one group with both (v2)."""

    folders: list[Path] = field(default_factory=list)


def create(limit_bytes: int, processes: int = PROCESSES) -> Group | None:
    """New cgroups under this process's own: memory of at most ``limit_bytes`` (swap not counted; 0: none)
    and at most ``processes`` tasks (0: none), or None where neither is to be had. Groups left by processes
    that are gone are removed first."""
    memory, pids = (_memory_parent() if limit_bytes > 0 else (None, "")), (
        _pids_parent() if processes > 0 else (None, ""))
    name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    group = Group()
    for (folder, _), limits in ((memory, _memory_limits(limit_bytes, memory[1])),
                                (pids, {"pids.max": str(processes)})):
        if folder is None:
            continue
        _remove_stale(folder)
        made = next((f for f in group.folders if f.parent == folder), None)  # v2: one group, both limits
        target = made or folder / name
        try:
            if made is None:
                target.mkdir()
            for file, value in limits.items():
                (target / file).write_text(value)
        except OSError:
            if made is None:
                _rmdir(target)
            continue
        if made is None:
            group.folders.append(target)
    return group if group.folders else None


def _memory_limits(limit_bytes: int, version: str) -> dict[str, str]:
    if version == "v1":
        return {"memory.limit_in_bytes": str(limit_bytes)}
    return {"memory.max": str(limit_bytes), "memory.swap.max": "0"}


def _remove_stale(folder: Path) -> None:
    for old in folder.glob(f"{PREFIX}*"):
        pid = old.name.removeprefix(PREFIX).split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            _rmdir(old)


def limits_processes(group: Group | None) -> bool:
    """Whether ``group`` holds a pids limit (else :func:`nproc_limit` stands in)."""
    return group is not None and any((f / "pids.max").exists() for f in group.folders)


def nproc_limit(processes: int = PROCESSES) -> int | None:
    """The ``RLIMIT_NPROC`` to give a sandbox's first process where no pids cgroup holds it, or None (root,
    whom it does not bind; or no room under this user's own limit).

    RLIMIT_NPROC does not count a sandbox's tasks: the kernel refuses a fork when the forking user's tasks on
    the whole machine (every process and thread of that real uid, the grader's own included) reach it. So
    the value is what this user runs now plus ``processes``, and never more than this user's own limit less
    :data:`NPROC_HEADROOM`: a sandbox that fills its share still leaves the grader, whose own limit is not
    lowered, room to fork (its workers, the next kernel, bwrap)."""
    if os.getuid() == 0:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    limit = _user_tasks() + processes
    if soft != resource.RLIM_INFINITY:
        limit = min(limit, soft - NPROC_HEADROOM)
    return limit if limit > 0 else None


def _user_tasks() -> int:
    """Tasks (threads) of this process's real user on the machine, as ``/proc`` shows them."""
    uid, total = str(os.getuid()), 0
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = dict(line.split(":", 1) for line in Path(f"/proc/{name}/status").read_text().splitlines()
                              if line.startswith(("Uid:", "Threads:")))
                if fields["Uid"].split()[0] == uid:
                    total += int(fields["Threads"])
    return total


def join(group: Group | None, nproc: int | None = None) -> None:
    """Move the calling process into ``group``, or limit it with ``RLIMIT_NPROC`` ``nproc`` (for
    ``Popen(preexec_fn=...)``: before the sandbox's first process runs, so that everything it starts
    is counted)."""
    for folder in group.folders if group is not None else []:
        with open(folder / "cgroup.procs", "w") as f:
            f.write("0")
    if nproc is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def preexec(group: Group | None):
    """The ``preexec_fn`` that puts a sandbox's first process in ``group``, with ``RLIMIT_NPROC`` where
    ``group`` has no pids limit (None: nothing to do)."""
    nproc = None if limits_processes(group) else nproc_limit()
    if group is None and nproc is None:
        return None
    return lambda: join(group, nproc)


def remove(group: Group | None) -> None:
    """Remove ``group`` once its processes are gone (a cgroup's files cannot be deleted, only the folder)."""
    for folder in group.folders if group is not None else []:
        _rmdir(folder)


def _rmdir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # still holding processes: left for the next start's clean-up
        folder.rmdir()
