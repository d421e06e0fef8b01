"""``transformer-course check``, warm: a server of the user's own that keeps the grader set up.

A student runs ``check`` after every change. Done from nothing, a check spends some 4 s on a 2-core
machine before and around the notebook's cells: Python imports nbgrader, the work area is laid
out, the assignment's release and gradebook are generated, and a kernel template imports torch. So
a check that found no server starts one when it has printed its answer; the server sets all of that
up once (every assignment) and waits :data:`IDLE_S` seconds for the next check, which sends it the
notebook's path and prints the answer it gets back.

Nothing of one notebook reaches the next: as when a class is graded, each notebook gets a kernel
forked from the template and a judge of its own, and the work area is put back byte for byte
before it (:meth:`.Grader.grade`).

The server is found by a Unix socket in a folder that only this user may enter, named by what
decides a grade (:func:`.grader_version`: the grader's code, the reference, the sources) and by the
interpreter, the course's folder, the timeout and the environment the grader reads. Anything else
gets a server of its own, and a new server stops the older ones of the same course. Where there is
no answer, or a wrong one, the check runs as from nothing. ``COURSE_CHECK_SERVER=off`` turns the
server off; ``COURSE_CHECK_IDLE`` sets how long it waits (seconds).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# As the command does (cli.py): nbformat's jsonschema need not build rfc3987_syntax's parsers (0.8 s).
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]

from transformer_course.layout import Repo  # noqa: E402 (after the line above)

IDLE_S = 900  # s without a request before the server ends (it holds torch in two sandboxes: ~1 GB)
ANSWER_TIMEOUT = 3600  # s a client waits for its answer (a notebook's own time limit is 1,800 s)
# The environment a grade depends on: the grader's switches and what Python and torch read at start.
ENVIRONMENT = ("COURSE_", "PYTHON", "OMP_", "MKL_", "LD_", "TMPDIR")
MAX_REQUEST = 64 * 1024  # bytes: a path and two flags


def enabled() -> bool:
    return (os.environ.get("COURSE_CHECK_SERVER", "").lower() not in ("off", "0", "no")
            and hasattr(socket, "AF_UNIX") and hasattr(os, "getuid"))


def folder() -> Path | None:
    """This user's folder for check servers, created private; None where it exists but is not (a folder
    another user made, or a link): the checks then run without a server."""
    path = Path(tempfile.gettempdir()) / f"tc-check-{os.getuid()}"
    try:
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        info = path.lstat()
    except OSError:  # a temporary folder that cannot be written
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return path


def key(repo: Repo, timeout: int) -> str:
    """What a server's grades depend on, as a name for its socket."""
    from transformer_course.grading.version import grader_version

    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(ENVIRONMENT))
    text = json.dumps([grader_version(repo), str(repo.root.resolve()), sys.executable, timeout, env])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def ask(repo: Repo, notebook: Path, timeout: int, as_json: bool) -> tuple[str, str, int] | None:
    """What the check of ``notebook`` by a running server prints (its standard output and error) and
    its exit code, or None where there is no server for this course and these settings (or it failed
    to answer)."""
    if not enabled() or (where := folder()) is None:
        return None
    path = where / f"{key(repo, timeout)}.sock"
    if not path.exists():
        return None
    try:
        answer = _exchange(path, {"notebook": str(notebook), "json": as_json}, ANSWER_TIMEOUT)
        out, err, code = answer.get("out"), answer.get("err", ""), answer.get("code")
        if isinstance(out, str) and isinstance(err, str) and isinstance(code, int):
            return out, err, code
    except (OSError, ValueError, AttributeError):  # no server (a stale socket), or it broke off
        pass
    return None


def _exchange(path: Path, request: dict, timeout: float) -> Any:
    """The server's answer at ``path`` to ``request`` (one JSON object each way)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(str(path))
        conn.sendall(json.dumps(request).encode())
        conn.shutdown(socket.SHUT_WR)
        return json.loads(b"".join(iter(lambda: conn.recv(1 << 16), b"")))


def ready(repo: Repo, timeout: int, wait: float = 120) -> bool:
    """Whether a server for this course and these settings answers (set up), waiting at most ``wait`` s
    for one to start and set up."""
    where = folder()
    if where is None:
        return False
    path, deadline = where / f"{key(repo, timeout)}.sock", time.monotonic() + wait
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if _exchange(path, {"ping": True}, max(1.0, deadline - time.monotonic())).get("code") == 0:
                return True
        time.sleep(0.1)
    return False


def start(repo: Repo, timeout: int) -> None:
    """Start a server for this course and these settings in the background, unless one runs."""
    if not enabled() or (where := folder()) is None:
        return
    name = key(repo, timeout)
    if _listening(where / f"{name}.sock"):
        return
    log = open(where / f"{name}.log", "w")  # noqa: SIM115 (the server's; closed here once it has it)
    with log:
        subprocess.Popen([sys.executable, "-m", "transformer_course.grading.check_server", str(repo.root),
                          str(timeout), name], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         start_new_session=True, cwd=repo.root)


def stop_others(where: Path, root: Path, name: str) -> None:
    """Stop the servers of the same course made with other settings or code (their grades are stale)."""
    for record in where.glob("*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            info = json.loads(record.read_text())
            if record.stem != name and info["root"] == str(root):
                os.kill(int(info["pid"]), signal.SIGTERM)
                record.unlink(missing_ok=True)


def _peer_is_me(conn: socket.socket) -> bool:
    if not hasattr(socket, "SO_PEERCRED"):
        return True  # the folder's permissions alone (macOS)
    _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid == os.getuid()


def serve(root: Path, timeout: int, name: str) -> None:
    """Set the grader up, then answer checks until :data:`IDLE_S` seconds pass without one."""
    where = folder()
    if where is None:
        return
    repo = Repo(root)
    path, record = where / f"{name}.sock", where / f"{name}.json"
    stop_others(where, repo.root, name)
    try:
        idle = float(os.environ.get("COURSE_CHECK_IDLE", IDLE_S))
    except ValueError:  # not a number: the default
        idle = IDLE_S
    with tempfile.TemporaryDirectory(prefix="tc-checkd-") as tmp, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        if not _bind(server, path):
            return  # another check started one a moment ago
        # Bound before the set-up: a check that comes meanwhile waits for it instead of doing it all again.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            record.write_text(json.dumps({"pid": os.getpid(), "root": str(repo.root)}))
            server.listen(8)
            from transformer_course.grading.notebook import workarea
            from transformer_course.grading.notebook.grade import Grader

            work = Path(tmp) / "nbgrader"
            workarea.create(work, repo)
            grader = Grader(work, repo, timeout, created=True)
            server.settimeout(idle)
            print(f"check server {name}: ready ({time.strftime('%H:%M:%S')})", flush=True)
            while True:
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    break
                with conn:
                    conn.settimeout(30)
                    started = time.perf_counter()
                    answer = _answer(conn, repo, grader)
                    if answer is None:
                        continue  # a connection that asked nothing (a check that a server listens)
                    with contextlib.suppress(OSError):
                        conn.sendall(json.dumps(answer).encode())
                    if not answer.get("ping"):
                        print(f"answered in {time.perf_counter() - started:.2f} s: exit {answer.get('code')}",
                              flush=True)
                    if answer.get("broken"):
                        break  # the client checks from nothing; a fresh server next time
        finally:
            path.unlink(missing_ok=True)
            (where / f"{name}.log").unlink(missing_ok=True)
            with contextlib.suppress(OSError, ValueError):
                if json.loads(record.read_text()).get("pid") == os.getpid():
                    record.unlink()
            if "transformer_course.grading.kernel.forkserver" in sys.modules:  # its kernel templates mount the folder
                sys.modules["transformer_course.grading.kernel.forkserver"].stop_all()  # about to be removed


def _bind(server: socket.socket, path: Path) -> bool:
    """Bind ``server`` to ``path``, replacing a socket no server listens on (one killed before it could
    remove it); False where a server listens there already."""
    try:
        server.bind(str(path))
        return True
    except OSError:
        if _listening(path):
            return False
    path.unlink(missing_ok=True)
    try:
        server.bind(str(path))
    except OSError:
        return False
    return True


def _listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def _answer(conn: socket.socket, repo: Repo, grader: Any) -> dict[str, Any] | None:
    """The answer to the request on ``conn``: a check's printed text and exit code, ``broken`` where the
    grader failed (the client then checks from nothing), None for a connection that asked nothing."""
    from transformer_course.grading.notebook.grade import assignment_of, check_report, check_with

    try:
        if not _peer_is_me(conn):
            return None
        data = b""
        while len(data) <= MAX_REQUEST and (chunk := conn.recv(1 << 16)):
            data += chunk
        if not data:
            return None
        request = json.loads(data)
        if request == {"ping": True}:  # ready(): set up and answering
            return {"out": "", "err": "", "code": 0, "ping": True}
        notebook, as_json = Path(request["notebook"]), bool(request.get("json"))
    except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
        return {"error": f"unreadable request ({exc})"}
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            assignment = assignment_of(notebook, repo)
            result = check_with(grader, assignment, notebook)
            text, code = check_report(result, repo, as_json)
        return {"out": text, "err": printed.getvalue(), "code": code}
    except (FileNotFoundError, ValueError, KeyError) as exc:  # what the command says of a wrong path
        return {"out": "", "err": printed.getvalue() + f"transformer-course check: error: {exc}\n", "code": 2}
    except Exception as exc:  # noqa: BLE001 (the grader broke: the client checks from nothing)
        print(f"check server: {type(exc).__name__}: {exc}", flush=True)
        return {"broken": str(exc)}


if __name__ == "__main__":
    serve(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
