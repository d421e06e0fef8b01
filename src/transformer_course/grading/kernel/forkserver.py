"""Grading kernels forked from a warm template inside the worker's sandbox.

Starting a kernel costs about 2 s of CPU before the notebook's first line runs: a Python
process, ipykernel, and then torch and matplotlib, which every notebook of the course imports.
On a 2-core machine grading a class, that is a third of the work. So each grading worker keeps
one sandbox (:mod:`.sandbox`, the same mounts a kernel gets) holding a template process
(:mod:`.kernel_template`) that has imported those once and never runs a notebook; every
notebook still gets a fresh kernel, forked from it, never reused.

What a notebook could leave behind for the next one is removed before the next kernel
starts and again as soon as a kernel ends: every other process of the sandbox is killed and
``/tmp`` (the kernels' HOME) emptied; the notebook's own folder is reset by the grader as
before. The template is non-dumpable, so a kernel cannot read or change its memory. A kernel
that kills the template ends its own sandbox: that notebook crashes as it would have, and the
next kernel gets a new template. Any failure of the template falls back to starting the kernel
the ordinary way. ``COURSE_FORKSERVER=off`` turns it off.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from jupyter_client.provisioning import LocalProvisioner

from transformer_course.grading.kernel import memcg, sandbox

# Imported by the template once: what the course's notebooks import, and the kernel itself.
# Not matplotlib_inline.backend_inline: imported before the kernel's shell exists, it never hooks
# into it, and figures would not show (tests/test_tamper.py compares outputs with a fresh kernel).
WARM = ["torch", "numpy", "matplotlib", "matplotlib.pyplot", "seaborn", "IPython", "ipykernel.kernelapp",
        "ipykernel.ipkernel"]
# Variables read when Python or torch start: a kernel asking for other values gets a new template.
STARTUP_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "OMP_NUM_THREADS",
               "MKL_NUM_THREADS", "LD_PRELOAD", "LD_LIBRARY_PATH")
READY_TIMEOUT = 300  # s: importing torch on a loaded machine
REQUEST_TIMEOUT = 20  # s: a launch (kill, empty /tmp, fork) takes well under one


class TemplateError(RuntimeError):
    """The template did not answer as it should; it is stopped and replaced."""


def enabled() -> bool:
    """Whether kernels are forked: the sandbox is on (never without: the template kills every
    other process it may signal) and ``COURSE_FORKSERVER`` is not off."""
    if os.environ.get("COURSE_FORKSERVER", "").lower() in ("off", "0", "no"):
        return False
    return sandbox.bwrap() is not None and sandbox.isolates_network()


# The memory one notebook's kernel may use (MiB; 0: no limit), set by the grader (set_memory); the sandbox of a
# template and what it forks is limited to this plus TEMPLATE_MB, the template's own (torch and the rest imported).
MEMORY_MB = [4096]  # the grader's default (--memory-limit)
TEMPLATE_MB = 2048


def set_memory(memory_mb: int) -> None:
    """The memory (MiB; 0: none) of the templates this process starts from now on (:mod:`.memcg`)."""
    MEMORY_MB[0] = max(0, int(memory_mb))


_SOCKETS: list[str] = []  # this process's folder for kernels' IPC sockets, bound into every template's sandbox


def sockets_root() -> str:
    """The folder under which each forked kernel gets its sockets' folder (the same for every template
    of this process, so that a kernel started after a template was replaced still has it)."""
    if not _SOCKETS or not os.path.isdir(_SOCKETS[0]):
        _SOCKETS[:] = [sandbox.process_folder("kernels")]
    return _SOCKETS[0]


class ForkServer:
    """One sandbox with one template; :meth:`request` sends it one JSON line and reads one back.
    The template imports for a few seconds after it starts: the first request waits for it."""

    def __init__(self, cmd: list[str], env: dict):
        self.env = {k: env.get(k) for k in STARTUP_ENV}
        # Everything the sandbox holds counts against one limit: the template, its kernel or judge, their tmpfs;
        # and so do its processes (memcg.PROCESSES, threads included).
        self.group = memcg.create((MEMORY_MB[0] + TEMPLATE_MB) << 20 if MEMORY_MB[0] else 0)
        self.process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env, cwd="/", text=True,
                                        preexec_fn=memcg.preexec(self.group))
        self.ready = False

    def alive(self) -> bool:
        return self.process.poll() is None

    def request(self, message: dict | None, timeout: float = REQUEST_TIMEOUT) -> dict:
        """Send ``message`` (None: only read) and return the reply.

        Raises:
            TemplateError: the template did not start, did not reply within ``timeout`` seconds, or is gone.
        """
        if not self.ready:
            self.ready = True
            self.request(None, READY_TIMEOUT)
        try:
            if message is not None:
                self.process.stdin.write(json.dumps(message) + "\n")
                self.process.stdin.flush()
            ready, _, _ = select.select([self.process.stdout], [], [], timeout)
            reply = json.loads(self.process.stdout.readline() if ready else "")
            if not isinstance(reply, dict):
                raise ValueError(f"unexpected reply {reply!r}")
            return reply
        except (OSError, ValueError) as exc:
            self.stop()
            raise TemplateError(f"the kernel template did not answer ({exc or 'no reply'})") from exc

    def stop(self) -> None:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.process.kill()  # bwrap, and with it the whole sandbox
            self.process.wait(10)
        memcg.remove(self.group)


_SERVERS: dict[tuple[str, ...], ForkServer] = {}


def server(python: str, hidden: list[str], readonly: list[str], writable: list[str], env: dict,
           warm: list[str] = WARM) -> ForkServer:
    """This process's template for kernels run by ``python`` with these mounts and start-up
    variables, started if there is none (it may still be importing: see :class:`ForkServer`).
    ``warm``: the modules it imports once (a judges' template warms the judge's instead)."""
    source = Path(__file__).with_name("kernel_template.py").read_text()
    # The sandbox's command itself is the key: it also records which of the folders existed.
    cmd = sandbox.command([python, "-c", source, *warm], hidden, readonly, [*writable, sockets_root()],
                          network=False)
    key = tuple(cmd)
    current = _SERVERS.get(key)
    if current is not None and (not current.alive() or current.env != {k: env.get(k) for k in STARTUP_ENV}):
        _SERVERS.pop(key).stop()
        current = None
    if current is None:
        current = _SERVERS[key] = ForkServer(cmd, env)
    return current


def prestart(hidden: list[str], readonly: list[str], writable: list[str], env: dict) -> None:
    """Start the template that this process's next kernels with these settings will be forked from
    (:class:`~.kernels.SandboxedKernelManager`'s ``hidden``, ``readonly``, ``writable``; the
    kernel's environment), without waiting: it imports while the grader sets up. Nothing happens
    when kernels are not forked; a template no kernel asks for is stopped by :func:`stop_all`."""
    if enabled():
        server(sys.executable, [*hidden, sandbox.connections_dir()], readonly, writable, env)


def stop_all() -> None:
    """Stop every template of this process (their sandboxes end with them)."""
    for key in list(_SERVERS):
        _SERVERS.pop(key).stop()
    if _SOCKETS:
        shutil.rmtree(_SOCKETS.pop(), ignore_errors=True)


atexit.register(stop_all)


class ForkProvisioner(LocalProvisioner):
    """jupyter_client's provisioner for a kernel forked by the worker's template; where the
    template fails twice, the kernel starts the ordinary way (in its own sandbox)."""

    fork_pid: int | None = None
    forked = False

    @property
    def has_process(self) -> bool:
        return self.fork_pid is not None if self.forked else super().has_process

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
        km = self.parent
        env = dict(kwargs.get("env") or os.environ)
        at = cmd.index("-f")  # cmd: python -m ipykernel_launcher -f <connection file> <arguments>
        # The sockets' folder of every kernel of this worker is one mount: emptied of all but this kernel's
        # own folder, once every process of the last notebook has ended, so no file reaches the next one.
        request = {"op": "launch", "env": env, "cwd": str(kwargs.get("cwd") or "/"), "arguments": cmd[at + 2:],
                   "connection": Path(km.connection_file).read_text(),
                   "empty": [sockets_root()], "keep": [km._sockets] if km._sockets else []}
        for _ in range(2):  # a template that died (a notebook may kill it): once more, with a new one
            try:
                self.fork_server = server(cmd[0], km.kernel_hidden(), km.readonly, km.writable, env)
                self.fork_pid = int(self.fork_server.request(request)["pid"])
                self.forked = True
                self.pid, self.cwd = self.fork_pid, kwargs.get("cwd")
                return self.connection_info
            except (TemplateError, KeyError, TypeError, ValueError):
                continue
        return await super().launch_kernel(km.sandboxed_cmd(cmd), **kwargs)

    def _ask(self, message: dict) -> dict | None:
        try:
            return self.fork_server.request(message) if self.fork_server.alive() else None
        except TemplateError:
            return None

    async def poll(self) -> int | None:
        if not self.forked:
            return await super().poll()
        if self.fork_pid is None:
            return 0
        reply = self._ask({"op": "poll", "pid": self.fork_pid})
        return -signal.SIGKILL if reply is None else reply.get("exit")

    async def wait(self) -> int | None:
        if not self.forked:
            return await super().wait()
        while (code := await self.poll()) is None:
            await asyncio.sleep(0.05)
        self.fork_pid = None
        return code

    async def send_signal(self, signum: int) -> None:
        if not self.forked:
            return await super().send_signal(signum)
        if self.fork_pid is not None:
            self._ask({"op": "signal", "pid": self.fork_pid, "signal": int(signum)})

    async def kill(self, restart: bool = False) -> None:
        if not self.forked:
            return await super().kill(restart)
        await self.send_signal(signal.SIGKILL)

    async def terminate(self, restart: bool = False) -> None:
        if not self.forked:
            return await super().terminate(restart)
        await self.send_signal(signal.SIGTERM)

    async def cleanup(self, restart: bool = False) -> None:
        if self.forked:
            # what the notebook started ends now, not at the next kernel's start; so do the files it left
            self._ask({"op": "clean", "empty": [sockets_root()]})
        await super().cleanup(restart)
