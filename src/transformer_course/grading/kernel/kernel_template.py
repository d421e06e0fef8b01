"""The kernel template: a process inside a worker's sandbox that forks grading kernels.

Started by :class:`~transformer_course.grading.kernel.forkserver.ForkServer` as ``python -c <this file's text>``
(the sandbox hides this repository, so the file itself cannot be imported there). It imports
what every grading kernel imports (torch, matplotlib, ipykernel: about 2 s of CPU a kernel)
once, never runs any code of a notebook, and answers one JSON request a line on its stdin:

- ``launch``: end every other process of the sandbox, empty ``/tmp`` (the kernels' HOME) and
  ``/dev/shm``, then
  fork a fresh kernel that writes its connection file and starts ipykernel;
- ``poll``: the kernel's exit code, or None while it runs;
- ``signal``: send a signal to the kernel;
- ``clean``: end every other process of the sandbox and empty ``/tmp`` and ``/dev/shm``;
- ``launch``, ``clean`` and ``call`` also empty the folders a request names in ``empty`` (the kernels'
  or the judges' sockets' folder, which the sandbox mounts), but for those in ``keep`` (the new one's own);
- ``call``: the same cleaning, then fork a child that runs ``module.function(args)`` and exits
  (a judge of one notebook, :mod:`transformer_course.grading.judging.judge_process`, in a template that
  warmed that module; it stays non-dumpable).

It makes itself non-dumpable, so a kernel cannot read or write its memory (ptrace, /proc).
Standard library only until the imports it warms; no import of this package.
"""

import ctypes
import json
import os
import shutil
import signal
import sys
import time

PR_SET_DUMPABLE = 4
SANDBOX_ENV = ("HOME", "IPYTHONDIR", "MPLCONFIGDIR", "PYTHONNOUSERSITE", "JPY_PARENT_PID")


def others() -> list[int]:
    """Processes of this sandbox other than bwrap's init (1) and this one."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]


def clean() -> None:
    for _ in range(50):
        try:
            os.kill(-1, signal.SIGKILL)  # every process this one may signal, except itself and init
        except ProcessLookupError:
            pass
        while True:  # reap the kernels (init reaps the rest)
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not others():
            break
        time.sleep(0.01)
    for folder in ("/tmp", "/dev/shm"):  # shared memory too: files there outlive the kernel that wrote them
        if os.path.isdir(folder):
            wipe(folder, mount_points(folder))


def mount_points(under: str) -> set[str]:
    """Folders under ``under`` that the sandbox mounts from the grader's side (not to be emptied)."""
    with open("/proc/self/mounts") as f:
        points = {line.split()[1].replace("\\040", " ") for line in f}
    return {p for p in points if p.startswith(under + "/")}


def wipe(folder: str, keep: set[str]) -> None:
    """Remove everything in ``folder`` except the mount points ``keep`` and the folders leading to them."""
    for entry in os.listdir(folder):
        path = os.path.join(folder, entry)
        if path in keep:
            continue
        if any(k.startswith(path + "/") for k in keep):
            wipe(path, keep)
        elif os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def start_kernel(request: dict, channel: tuple[int, int], sandbox_env: dict) -> None:
    """In the forked child: become a fresh kernel. Never returns to the request loop."""
    code = 1
    try:
        for fd in channel:
            os.close(fd)
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # as a freshly started kernel is
        os.setsid()
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ.update(sandbox_env)
        os.chdir(request["cwd"])
        connection = f"/tmp/kernel-{os.getpid()}.json"
        with open(connection, "w") as f:
            f.write(request["connection"])
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(threads))
        sys.argv = ["ipykernel_launcher", "-f", connection, *request["arguments"]]
        from ipykernel import kernelapp

        kernelapp.launch_new_instance()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def call(request: dict, channel: tuple[int, int]) -> None:
    """In the forked child: run ``module.function(args)``. Never returns to the request loop."""
    code = 1
    try:
        for fd in channel:
            os.close(fd)
        os.setsid()
        import importlib

        getattr(importlib.import_module(request["module"]), request["function"])(request.get("args"))
        code = 0
    except BaseException:
        pass
    os._exit(code)


def warm_meta() -> None:
    """A process's first operations on the meta device (the tests use it to find tensors made on the
    CPU where a GPU was asked for) import some 800 modules of torch: 1.2 s on a 2-core machine, in
    each kernel and each judge of a notebook whose tests use it. Done here once, every process forked
    after has them."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        t = torch.zeros(2, 3, device="meta")
        torch.cat([torch.full_like(t[:, :1], 1), t[:, :-1]], dim=1)
        (t @ t.T).softmax(-1).masked_fill(torch.ones(2, 2, dtype=torch.bool, device="meta"), 0.0)
    except Exception:  # noqa: BLE001 (a torch without the meta device: its processes pay for it themselves)
        pass


def serve(warm: list[str]) -> None:
    # The requests' pipe moves off 0 and 1, which point at /dev/null: no kernel inherits it.
    channel = (os.dup(0), os.dup(1))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    requests, replies = os.fdopen(channel[0], "r"), os.fdopen(channel[1], "w")
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")  # as ipykernel sets it
    sandbox_env = {k: os.environ[k] for k in SANDBOX_ENV if k in os.environ}
    for name in warm:
        try:
            __import__(name)
        except Exception:  # a missing optional package: its kernels import it themselves
            pass
    warm_meta()
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    exits: dict[int, int] = {}

    def reply(**values) -> None:
        replies.write(json.dumps(values) + "\n")
        replies.flush()

    reply(ready=True, pid=os.getpid())
    for line in requests:
        request = json.loads(line)
        op, pid = request.get("op"), request.get("pid")
        if op in ("launch", "clean", "call"):
            clean()
            exits.clear()
            for folder in request.get("empty", []):  # the kernels' sockets' folder: a mount, so not in /tmp's wipe
                if os.path.isdir(folder):
                    wipe(folder, {*request.get("keep", []), *mount_points(folder)})
        if op == "launch":
            child = os.fork()
            if child == 0:
                start_kernel(request, channel, sandbox_env)
            reply(pid=child)
        elif op == "call":
            child = os.fork()
            if child == 0:
                call(request, channel)
            reply(pid=child)
        elif op == "poll":
            if pid not in exits:
                try:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        exits[pid] = os.waitstatus_to_exitcode(status)
                except ChildProcessError:
                    exits[pid] = -signal.SIGKILL
            reply(exit=exits.get(pid))
        elif op == "signal":
            try:
                os.kill(pid, request["signal"])
                reply(ok=True)
            except ProcessLookupError:
                reply(ok=False)
        else:
            reply(ok=True)


libc = ctypes.CDLL(None, use_errno=True)
if __name__ == "__main__":  # run as `python -c`; importing it does nothing
    serve(sys.argv[1:])
