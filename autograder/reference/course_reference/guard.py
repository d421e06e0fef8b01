"""The grader's watch inside a student's kernel: what answer cells may not change.

nbgrader decides a test cell's points from its outputs alone (an error output = no
points), in the same Python process as the student's code. So an answer cell could
replace ``torch.allclose``, the checks, IPython's traceback display or the hidden
reference, and failing tests would look like passing ones. The grader therefore
(``transformer_course.grading.notebook.nbgrader_setup.GuardNotebook``):

1. runs :func:`install` in a cell of its own before any student code: resource limits,
   a snapshot of the functions and hooks that tests rely on, the hidden reference taken
   off ``sys.path``/``sys.modules``, and a runner under a random name;
2. runs every test cell through that runner (the cell only names the test; its source
   comes from the grader's file, so an input transformer never sees hidden tests), which
   first puts the snapshot back, runs the test code, refuses a result computed by the
   reference's own implementation of the exercise, and, only if the test code finished,
   publishes a token (an HMAC of the test cell's source and of the values it recorded,
   with a secret the kernel never sees in any cell source);
3. after execution, accepts a test cell only with its valid token.

Not a sandbox: code that knows this module's internals can still defeat it from inside
the process (README, "Threat model"). It stops the monkeypatching a student can do
without reading the grader.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import importlib
import inspect
import json
import os
import sys
import types
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TOKEN_MIME = "application/x.course-grader+json"
PACKAGE = "course_reference"
_HERE = str(Path(__file__).resolve().parent)

# Modules whose public functions tests and checks rely on (their dict entries are restored).
_MODULES = [
    "builtins", "math", "random", "functools", "numpy", "numpy.testing", "torch", "torch.nn",
    "torch.nn.functional", "torch.nn.init", "torch.testing", "torch.linalg", "torch.special",
    "torch.autograd", "torch.optim", "torch.optim.lr_scheduler", "torch.utils.data",
]
# Classes whose methods tests rely on (changed methods restored, added ones removed).
_CLASSES = [
    ("torch", "Tensor"), ("torch.nn", "Module"), ("torch.nn", "Parameter"), ("torch.nn", "Linear"),
    ("torch.nn", "LayerNorm"), ("torch.nn", "Embedding"), ("torch.nn", "Dropout"), ("torch.nn", "ModuleList"),
    ("torch.nn", "Sequential"), ("torch.nn", "ReLU"), ("torch.optim", "Optimizer"), ("torch.optim", "Adam"),
    ("numpy", "ndarray"),
]
_SYS_HOOKS = ["excepthook", "displayhook", "stdout", "stderr", "exit"]
# IPython objects that turn an exception into the error output nbgrader grades on.
_SHELL_ATTRS = ["InteractiveTB", "SyntaxTB", "display_pub", "displayhook", "display_formatter",
                "custom_exceptions", "CustomTB", "kernel", "showtraceback", "_showtraceback",
                "showsyntaxerror", "run_cell", "run_cell_async", "run_ast_nodes", "run_code"]


def _resolve(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _classes_of(obj: Any) -> list[type]:
    return [c for c in type(obj).__mro__ if c is not object]


class _Snapshot:
    """Attribute values of modules, classes and live objects, to put back later."""

    def __init__(self) -> None:
        self.modules: list[tuple[dict, dict]] = []
        self.classes: list[tuple[type, dict]] = []
        self.objects: list[tuple[Any, dict, set]] = []
        self.sys_modules: dict[str, types.ModuleType] = {}

    def module(self, module: types.ModuleType | None) -> None:
        if module is not None:
            self.modules.append((module.__dict__, dict(module.__dict__)))
            self.sys_modules[module.__name__] = module

    def cls(self, cls: type) -> None:
        if all(c is not cls for c, _ in self.classes):
            self.classes.append((cls, dict(vars(cls))))

    def obj(self, obj: Any, names: list[str]) -> None:
        """``names`` of ``obj`` to restore, and instance attributes that may not shadow its class's."""
        saved = {n: obj.__dict__[n] for n in names if n in getattr(obj, "__dict__", {})}
        self.objects.append((obj, saved, set(getattr(obj, "__dict__", {}))))
        for cls in _classes_of(obj):
            if cls.__module__.split(".")[0] in ("IPython", "ipykernel", "jupyter_client", "zmq"):
                self.cls(cls)

    def restore(self) -> list[str]:
        """Put everything back; returns what had been changed (for the record)."""
        changed = []
        for live, saved in self.modules:
            for key, value in saved.items():
                if live.get(key, _MISSING) is not value:
                    live[key] = value
                    changed.append(f"{saved.get('__name__', '?')}.{key}")
        for cls, saved in self.classes:
            for key in [k for k in vars(cls) if k not in saved]:
                with contextlib.suppress(AttributeError, TypeError):
                    delattr(cls, key)
                    changed.append(f"{cls.__name__}.{key}")
            for key, value in saved.items():
                if vars(cls).get(key, _MISSING) is not value:
                    with contextlib.suppress(AttributeError, TypeError):
                        setattr(cls, key, value)
                        changed.append(f"{cls.__name__}.{key}")
        for obj, saved, keys in self.objects:
            live = obj.__dict__
            for key in [k for k in live if k not in keys and callable(getattr(type(obj), k, None))]:
                del live[key]
                changed.append(f"{type(obj).__name__}.{key}")
            for key, value in saved.items():
                if live.get(key, _MISSING) is not value:
                    live[key] = value
                    changed.append(f"{type(obj).__name__}.{key}")
        for name, module in self.sys_modules.items():
            if sys.modules.get(name) is not module:
                sys.modules[name] = module
        return changed


_MISSING = object()


def _trusted_prefixes() -> tuple[str, ...]:
    """Files whose frames are not the student's: the reference, the interpreter and its packages."""
    import sysconfig

    paths = {_HERE, sys.prefix, sys.base_prefix, sys.exec_prefix}
    paths.update(p for p in sysconfig.get_paths().values() if p)
    return tuple(sorted(paths)) + ("<frozen", "<test cell", "<string>")


class _Watch:
    """Notices when the reference's own implementation of an exercise runs for the student:
    a call into it whose nearest caller outside the interpreter's own files is student code."""

    def __init__(self, forbidden: set[tuple[str, str]]):
        self.forbidden = forbidden
        self.trusted = _trusted_prefixes()
        self.seen = ""

    def __call__(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event != "call" or self.seen:
            return
        code = frame.f_code
        if (code.co_filename, code.co_qualname) not in self.forbidden:
            return
        caller = frame.f_back
        while caller is not None:
            name = caller.f_code.co_filename
            if name.startswith(_HERE) or name.startswith("<test cell"):
                return  # the checks computing the expected result
            if not name.startswith(self.trusted):
                self.seen = code.co_qualname
                return
            caller = caller.f_back


def _reference_codes(exercise: str, modules: list[types.ModuleType]) -> tuple[set, list]:
    """(file name, function name) of the reference implementation of ``exercise``, and its objects."""
    keys, objects = set(), []
    for module in modules:
        obj = vars(module).get(exercise)
        if obj is None or not module.__name__.startswith(f"{PACKAGE}.nb"):
            continue
        objects.append(obj)
        functions = [obj] if inspect.isfunction(obj) else [
            f for f in vars(obj).values() if inspect.isfunction(f)] if inspect.isclass(obj) else []
        for fn in functions:
            keys.add((fn.__code__.co_filename, fn.__code__.co_qualname))
    return keys, objects


def _is_reference(obj: Any, objects: list) -> bool:
    """``obj`` is the reference's object, a subclass or partial of it, or defined in the reference."""
    obj = getattr(obj, "func", obj)  # functools.partial
    if any(obj is o for o in objects):
        return True
    if inspect.isclass(obj):
        return any(c.__module__.startswith(PACKAGE) for c in obj.__mro__)
    return getattr(obj, "__module__", None) is not None and str(obj.__module__).startswith(PACKAGE)


class Runner:
    """Runs one test cell's code under the grader's watch (see the module docstring)."""

    def __init__(self, secret: bytes, tests: dict[str, str], snapshot: _Snapshot,
                 hidden: dict[str, types.ModuleType], ns: dict):
        self._secret, self._tests, self._snapshot, self._hidden, self._ns = secret, tests, snapshot, hidden, ns

    def __call__(self, grade_id: str, exercise: str) -> None:
        source = self._tests[grade_id]  # not in the cell: input transformers see only this call
        self._snapshot.restore()
        ns = self._ns
        sys.modules.update(self._hidden)  # hidden tests import the checks
        keys, objects = _reference_codes(exercise, [m for m in self._hidden.values()])
        if exercise and _is_reference(ns.get(exercise), objects):
            self._hide()
            raise AssertionError(f"`{exercise}` is the hidden reference implementation, not your own; "
                                 "write it yourself.")
        watch = _Watch(keys)
        checks = self._hidden.get(f"{PACKAGE}.checks")
        recorded: list = []
        if checks is not None:
            checks.RECORD = recorded  # put back to None by the restore below
        previous = sys.getprofile()
        stdout = sys.stdout
        try:
            with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(stdout):
                warnings.simplefilter("always")
                sys.setprofile(watch)
                try:
                    with _plain_torch():
                        exec(compile(source, f"<test cell {grade_id}>", "exec"), ns)
                finally:
                    hooked = sys.getprofile() is watch
                    sys.setprofile(previous)
        finally:
            self._hide()
            self._snapshot.restore()
            for key in [k for k, v in ns.items() if v is not self and _from_reference(v)]:
                del ns[key]  # later answer cells must not reach the checks or the reference
        for w in caught:  # warnings go to stdout: nbgrader would take stderr as a failure
            print(f"warning (not graded): {w.category.__name__}: {w.message}")
        if watch.seen:
            raise AssertionError(f"`{exercise}` ran the hidden reference implementation ({watch.seen}) "
                                 "instead of your own code.")
        if not hooked:
            raise AssertionError("the notebook changed the interpreter's profiler during a test "
                                 "(sys.setprofile); the grader cannot accept this result.")
        payload = _serialize(recorded)
        _publish(token(self._secret, grade_id, source, payload), payload)

    def _hide(self) -> None:
        for name in list(sys.modules):
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                self._hidden[name] = sys.modules.pop(name)


@contextlib.contextmanager
def _plain_torch() -> Iterator[None]:
    """Torch as it ships, for the test: no ``__torch_function__`` of a tensor subclass or of a
    ``TorchFunctionMode``, and no ``TorchDispatchMode`` (any of them could answer "equal")."""
    import torch
    from torch.utils._python_dispatch import _len_torch_dispatch_stack, _pop_mode

    while _len_torch_dispatch_stack() > 0:
        _pop_mode()
    with torch._C.DisableTorchFunction():
        yield
    if _len_torch_dispatch_stack() > 0:
        raise AssertionError("the code under test left a TorchDispatchMode active; the grader cannot "
                             "accept this result.")


def _from_reference(value: Any) -> bool:
    if isinstance(value, types.ModuleType):
        return value.__name__.startswith(PACKAGE)
    module = getattr(value, "__module__", None)
    return isinstance(module, str) and module.startswith(PACKAGE)


def token(secret: bytes, grade_id: str, source: str, record: str = "") -> str:
    """The proof that ``source`` of test cell ``grade_id`` ran to its end under the runner,
    having recorded ``record`` (see :func:`_serialize`)."""
    digest = hashlib.sha256(record.encode()).hexdigest()
    return hmac.new(secret, f"{grade_id}\0{source}\0{digest}".encode(), hashlib.sha256).hexdigest()


def _serialize(recorded: list) -> str:
    """The values the test's passing comparisons saw, as base64 of ``torch.save`` ('' if none):
    the grader reads them back with ``weights_only=True`` and compares them itself."""
    if not recorded:
        return ""
    import base64
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(list(recorded), buffer)
    return base64.b64encode(buffer.getvalue()).decode()


def _publish(value: str, record: str) -> None:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell.display_pub.publish(data={TOKEN_MIME: {"token": value, "record": record}}, metadata={})


def _limit(memory_mb: int, cpu_s: int) -> None:
    """Hard per-kernel limits: allocations beyond ``memory_mb`` fail with MemoryError, and a
    kernel past ``cpu_s`` CPU seconds (a loop that ignores interrupts) is killed."""
    import resource

    for which, value in ((resource.RLIMIT_DATA, memory_mb * 2**20), (resource.RLIMIT_CPU, cpu_s)):
        if value > 0:
            with contextlib.suppress(ValueError, OSError):
                soft, hard = resource.getrlimit(which)
                cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
                resource.setrlimit(which, (cap, cap))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def install(ns: dict, name: str, secret_file: str, memory_mb: int = 0, cpu_s: int = 0) -> None:
    """Set up the watch in this kernel; the runner is bound to ``ns[name]``.

    Args:
        ns: the notebook's global namespace.
        name: a random name for the runner (not knowable in advance by the notebook).
        secret_file: a JSON file, read then deleted: ``secret`` (hex), the per-run secret, and
            ``tests``, the source of each test cell by grade_id (the cells only name them).
        memory_mb: data-segment limit of the kernel in MiB (0 = none).
        cpu_s: CPU-time limit of the kernel in seconds (0 = none).
    """
    path = Path(secret_file)
    given = json.loads(path.read_text())
    path.unlink()
    secret, tests = bytes.fromhex(given["secret"]), dict(given["tests"])
    _limit(memory_mb, cpu_s)
    with _quiet():
        # Checks of judged notebooks are not in the kernel's copy (transformer_course.grading.judging.judge).
        for module in sorted(Path(_HERE, "checks").glob("nb[0-9][0-9].py")):
            importlib.import_module(f"{PACKAGE}.checks.{module.stem}")
    snapshot = _Snapshot()
    for module in _MODULES:
        snapshot.module(_resolve(module))
    for module, attr in _CLASSES:
        owner = _resolve(module)
        if owner is not None and isinstance(getattr(owner, attr, None), type):
            snapshot.cls(getattr(owner, attr))
    for name_ in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        snapshot.module(sys.modules[name_])
    snapshot.modules.append((sys.__dict__, {k: sys.__dict__[k] for k in _SYS_HOOKS if k in sys.__dict__}))
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        snapshot.obj(shell, _SHELL_ATTRS)
        for attr in ("display_pub", "displayhook", "InteractiveTB", "SyntaxTB", "kernel"):
            part = getattr(shell, attr, None)
            if part is not None:
                snapshot.obj(part, [])
        session = getattr(getattr(shell, "kernel", None), "session", None)
        if session is not None:
            snapshot.obj(session, [])
        # The grader's own cell is not part of the student's history.
        for history in (ns.get("In"), ns.get("_ih"), getattr(shell.history_manager, "input_hist_raw", None),
                        getattr(shell.history_manager, "input_hist_parsed", None)):
            if isinstance(history, list) and history:
                history[-1] = ""
    hidden: dict[str, types.ModuleType] = {}
    runner = Runner(secret, tests, snapshot, hidden, ns)
    runner._hide()
    reference_root = str(Path(_HERE).parent)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(reference_root).resolve()]
    os.environ.pop("PYTHONPATH", None)
    importlib.invalidate_caches()
    ns[name] = runner


__all__ = ["TOKEN_MIME", "Runner", "install", "token"]
