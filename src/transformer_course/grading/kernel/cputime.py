"""CPU seconds of a notebook's own processes: what a cell's time limit counts.

Wall-clock time grows with the machine's load: a cell that needs 3 s of CPU takes about 15 s on two
cores that ten processes share. The CPU time the notebook's own processes spend (its kernel, with
every thread and child process, and its judge) does not, so a cell's budget is counted in it, and the
solution's calibration (:mod:`.limits`) measures it too. Wall-clock time stays as an outer bound only
(:data:`WALL_FACTOR` times the budget), for a cell that waits without computing.

The processes are read from ``/proc`` (user and system time of each process and of the children it
reaped, summed over a process tree), from outside the sandboxes: a kernel's sandbox holds its
template and one kernel at a time, a judges' sandbox its template and one judge, so what a tree
spent while a cell ran is what that cell's processes spent.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# A cell may run WALL_FACTOR times its CPU budget on the clock: a cell that waits (sleeps, blocks) uses no
# CPU, and a single-threaded cell on two cores shared by ten busy processes gets about 1/5 of a core.
WALL_FACTOR = 5
POLL = 0.5  # s between readings while a cell runs (a reading scans /proc: a few ms)
# Readings of one clock closer together than this are one reading: the grader reads it several times as a cell
# starts and as it ends (its limits, the notebook's clock, the cell's seconds), and /proc counts in ticks of
# 1/SC_CLK_TCK s (10 ms) anyway. Without it a notebook read all of /proc some 200 times (0.7 CPU s of 4).
FRESH = 0.02
# Without /proc (macOS) no process's CPU time can be read: the clock's seconds stand in for it.
READABLE = os.path.isdir("/proc/self")


def _processes() -> dict[int, tuple[int, float]]:
    """Every process this one can see: pid -> (parent pid, CPU seconds of it and of its reaped children)."""
    table = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:  # os.read rather than open(): no buffered file object for a line of a few hundred bytes
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                data = os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError:  # ended since the listing
            continue
        fields = data.rsplit(b")", 1)[-1].split()  # after the command's name, which may hold spaces
        try:
            # state, ppid, ... utime (14th field of the line), stime, cutime, cstime
            table[int(name)] = (int(fields[1]), sum(int(v) for v in fields[11:15]) / _TICK)
        except (IndexError, ValueError):
            continue
    return table


def tree_seconds(roots: list[int], table: dict[int, tuple[int, float]] | None = None) -> dict[int, float]:
    """CPU seconds spent by each process of ``roots`` and its descendants (threads and reaped children
    included), by root; a root that is gone is left out."""
    table = _processes() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found = {}
    for root in roots:
        if root not in table:
            continue
        total, stack, seen = 0.0, [root], set()
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            total += table[pid][1]
            stack.extend(children.get(pid, ()))
        found[root] = total
    return found


class Clock:
    """The CPU seconds a notebook's processes have spent since this clock was made.

    Args:
        roots: called at every reading, the processes whose trees are the notebook's (the kernel's
            sandbox, the judge's); disjoint trees.
        itself: count this process's own CPU time too (a judge that runs in the grading worker).

    A tree first seen at a reading counts from then on (a judges' template that started importing
    before the notebook is not the notebook's); a tree whose total drops (replaced) starts again from
    its new value. So the clock never runs backwards. Where ``/proc`` cannot be read it counts the
    clock's seconds instead (limits on the clock, as they were).
    """

    def __init__(self, roots: Callable[[], list[int]], itself: bool = False):
        self.roots, self.itself = roots, itself
        self._last: dict[object, float] = {}
        self._total = 0.0
        self._made = time.monotonic()
        self._read_at = -FRESH  # when the last reading ended (FRESH)
        self()

    def __call__(self) -> float:
        """The CPU seconds spent so far."""
        if not READABLE:
            return time.monotonic() - self._made
        if time.monotonic() - self._read_at < FRESH:
            return self._total
        try:
            roots = [r for r in self.roots() if r]
        except Exception:  # noqa: BLE001 (a kernel not started yet, or gone: nothing of it to count)
            roots = []
        now: dict[object, float] = dict(tree_seconds(roots)) if roots else {}
        if self.itself:
            now["itself"] = time.process_time()
        for key, seconds in now.items():
            last = self._last.get(key)
            if last is not None and seconds > last:
                self._total += seconds - last
            self._last[key] = seconds
        self._read_at = time.monotonic()
        return self._total
