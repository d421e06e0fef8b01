"""A sandbox for the kernels that run students' notebooks: bubblewrap (``bwrap``).

Each grading kernel starts inside ``bwrap`` with no capabilities (also when the grader runs as
root), its own PID namespace (every process it starts, even in a new session, dies with
it), a read-only view of the system folders only (:data:`SYSTEM`: not the users' homes, other
checkouts or data on the machine; the Python environment is mounted on its own), a private
empty ``/tmp`` and ``HOME`` (nothing such as an IPython startup file survives the notebook),
and the grader's folders hidden: the repository, the class's output and the other work
areas. It can write only to its own notebook's folder, which the grader resets before the
next notebook; it reads its own connection file and the hidden reference copy it is
graded with. It has no network: its own empty network namespace, and Jupyter talks to it
over IPC sockets (Unix domain sockets in a folder of its own) instead of TCP.

A grading worker's kernels share one such sandbox, forked from a warm template there
(:mod:`.forkserver`), which ends every process a kernel started and empties ``/tmp`` as soon as
the kernel ends; ``COURSE_FORKSERVER=off`` gives each kernel a sandbox of its own.

Where ``bwrap`` is missing (``make sandbox`` installs Debian's bubblewrap), kernels run
without it and :func:`warning` says so.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

# What a kernel sees of the machine, read-only, besides the Python environment and the folders
# the grader mounts for it: the operating system, nothing else (a copy of the course elsewhere
# on the machine, say in a user's home, stays out of its reach).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
# Bytes a kernel may keep in files in its /tmp (its HOME) and in /dev/shm, each; and in the empty
# folders that hide the grader's (they hold only the mount points of what is shown inside them).
TMPFS_BYTES = 512 * 2**20
HIDING_BYTES = 2**20


def bwrap() -> str | None:
    """The ``bwrap`` executable when it works here, else None. ``COURSE_SANDBOX=off`` turns it off."""
    if os.environ.get("COURSE_SANDBOX", "").lower() in ("off", "0", "no"):
        return None
    return _working_bwrap()[0]


@functools.cache
def _working_bwrap() -> tuple[str | None, str]:
    """(path, "") or (None, why): bwrap is installed and can create the namespaces it needs
    (a container without the privileges for them refuses)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return None, "bubblewrap (bwrap) is not installed"
    probe = [exe, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL",
             "--ro-bind", "/", "/",
             "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bwrap could not run here ({exc})"
    if done.returncode != 0:
        return None, f"bwrap cannot create its sandbox here ({done.stderr.strip()[:200]})"
    return exe, ""


def isolates_network() -> bool:
    """Whether bwrap can also give a kernel its own, empty network namespace here."""
    exe = bwrap()
    return exe is not None and _isolates_network(exe)


@functools.cache  # per bwrap, not per process: a process may run with COURSE_SANDBOX=off for a while
def _isolates_network(exe: str) -> bool:
    probe = [exe, "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def warning() -> str:
    """One line for the grader to print when kernels run without the sandbox ('' when they do not)."""
    if os.environ.get("COURSE_SANDBOX", "").lower() in ("off", "0", "no"):
        return "warning: COURSE_SANDBOX=off: students' notebooks run WITHOUT a sandbox"
    exe, why = _working_bwrap()
    if exe:
        return ""
    return (f"warning: {why}, so students' notebooks run WITHOUT a sandbox: a notebook can read and "
            "write what your user can, and leave processes behind. Install it with `make sandbox` "
            "(Debian's bubblewrap; root or sudo).")


def command(cmd: list[str], hidden: list[str], readonly: list[str], writable: list[str],
            network: bool = True) -> list[str]:
    """``cmd`` wrapped in bwrap: see the module docstring. Later mounts go over earlier ones, so
    a ``readonly`` or ``writable`` folder inside a ``hidden`` one is visible again. ``network``
    False gives it an empty network namespace (its Jupyter sockets must then be IPC)."""
    exe = bwrap()
    if exe is None:
        return cmd
    # --cap-drop ALL: run by root, bwrap would leave the kernel root's capabilities, and a kernel
    # with CAP_SYS_ADMIN can unmount the tmpfs that hides a folder and read what it hid.
    args = [exe, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL",
            *([] if network else ["--unshare-net"]),
            # Sized: files there are memory that no process limit counts (the memory cgroup does, where there is one).
            *_system(), "--dev", "/dev", "--size", str(TMPFS_BYTES), "--tmpfs", "/dev/shm", "--proc", "/proc",
            "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp",
            "--setenv", "HOME", "/tmp", "--setenv", "IPYTHONDIR", "/tmp/.ipython",
            "--setenv", "MPLCONFIGDIR", "/tmp/.matplotlib", "--setenv", "PYTHONNOUSERSITE", "1",
            # ipykernel watches its parent and exits when that is PID 1, as bwrap's init is; 1 turns
            # the watch off (--die-with-parent ends the sandbox with its parent instead).
            "--setenv", "JPY_PARENT_PID", "1"]
    for path in hidden:
        resolved = Path(path).resolve()
        if resolved.is_dir() and resolved != Path("/") and not resolved.is_relative_to("/tmp"):
            args += ["--size", str(HIDING_BYTES), "--tmpfs", path]
    for path in readonly:
        if Path(path).exists():
            args += ["--ro-bind", path, path]
    for path in writable:
        if Path(path).exists():
            args += ["--bind", path, path]
    return [*args, "--", *cmd]


def _system() -> list[str]:
    """bwrap arguments mounting :data:`SYSTEM` read-only (symbolic links as links: /lib -> usr/lib)."""
    args = []
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def process_folder(kind: str) -> str:
    """A new folder ``<tmp>/tc-<kind>-<pid>-<random>`` for this process, after removing those of the same
    kind left by processes that are gone (killed before their exit handlers could remove them)."""
    root = Path(tempfile.gettempdir())
    for old in root.glob(f"tc-{kind}-*-*"):
        pid = old.name.split("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return os.path.realpath(tempfile.mkdtemp(prefix=f"tc-{kind}-{os.getpid()}-"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


_CONNECTIONS: list[str] = []


def connections_dir() -> str:
    """This process's folder for its kernels' connection files (hidden from every kernel: they
    hold the other kernels' keys). Known before any kernel starts, so that a kernel template can
    be started ahead of its first kernel with the same mounts (:func:`.forkserver.prestart`)."""
    if not _CONNECTIONS or not os.path.isdir(_CONNECTIONS[0]):
        _CONNECTIONS[:] = [process_folder("connections")]
        atexit.register(shutil.rmtree, _CONNECTIONS[0], ignore_errors=True)
    return _CONNECTIONS[0]
