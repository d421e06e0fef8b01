"""Test cells judged in the grader's process: the kernel runs the student's code, the grader decides.

A test cell's code (visible or hidden, always the grader's trusted copy) runs here, in the grader,
with the reference importable. Every name the notebook defined is a :class:`Remote` proxy: calling
it, reading an attribute or running ``backward`` sends a request to the student's kernel, where
:mod:`.recorder` carries it out and sends back plain data (a literal, tensors as bytes, else
``torch.load(weights_only=True)``: :func:`.decoding.decode`).
So the expected values, the comparisons, the diagnosis of a known mistake and the message are all
computed here; the kernel only ever sees the inputs the grader chose and its own results. Code in
the kernel (a patched ``torch.allclose``, a tracer, a thread) can change what the student's code
returns, which is its right, and nothing else.

An earlier exercise's reference that a test lends to the student's code (``reference_for``: a
mistake in ``softmax`` is not charged to ``self_attention`` too) stays here as well: the kernel
gets a stub that asks this process for each result (forward and backward) over the kernel's stdin
channel, so the reference's code never enters the kernel.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import math
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from transformer_course.grading.judging.link import Link
from transformer_course.grading.judging.remote import LinkBroken, Remote
from transformer_course.grading.kernel.wire import plain


def calls_of(iterable: Any, function: Callable[[], Any], arguments: Callable[[Any], tuple[tuple, dict]],
             call: Callable[[Any], Any]) -> list[Any]:
    """``[f(...) for item in iterable]`` of a test cell (see :func:`batched`): where ``f`` (``function()``)
    is the notebook's, ``iterable`` a list, tuple or range, and every call's arguments (``arguments(item)``)
    plain values, the calls go to the kernel in one request (:meth:`Remote._course_map`); else each
    item is ``call(item)``, the comprehension as written."""
    items = iterable if type(iterable) in (list, tuple, range) else None
    if items is not None and len(items) > 1:
        fn = function()
        if type(fn) is Remote:  # type(): a proxy's __class__ may name torch's class
            try:
                calls = [arguments(item) for item in items]
            except Exception:  # noqa: BLE001 (an argument that cannot be computed ahead: as written, it raises in place)
                calls = []
            if calls and all(plain(c) for c in calls):
                return fn._course_map(calls)
    return [call(item) for item in (iterable if items is None else items)]


_PURE = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List, ast.operator, ast.unaryop,
         ast.expr_context)


class _Batched(ast.NodeTransformer):
    """Each ``[f(args) for target in iterable]`` (``f`` a name, the arguments names, constants and
    arithmetic of them: nothing that runs code of the kernel's or changes anything) made a call of
    :func:`calls_of`, which sends its calls at once where that cannot change what they do."""

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        return node  # a class body's names resolve differently: left as written

    def visit_ListComp(self, node: ast.ListComp) -> ast.AST:
        self.generic_visit(node)
        call = node.elt
        if not (len(node.generators) == 1 and not node.generators[0].ifs and not node.generators[0].is_async
                and isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and all(isinstance(n, _PURE) for a in call.args for n in ast.walk(a))
                and all(k.arg is not None and all(isinstance(n, _PURE) for n in ast.walk(k.value))
                        for k in call.keywords)):
            return node
        target, unparse = ast.unparse(node.generators[0].target), ast.unparse
        args = "".join(f"{unparse(a)}, " for a in call.args)
        kwargs = ", ".join(f"{k.arg!r}: {unparse(k.value)}" for k in call.keywords)
        one = f"for {target} in (__course_item__,)][0]"
        text = (f"__course_calls__({unparse(node.generators[0].iter)}, lambda: {unparse(call.func)}, "
                f"lambda __course_item__: [(({args}), {{{kwargs}}}) {one}, "
                f"lambda __course_item__: [{unparse(call)} {one})")
        return ast.copy_location(ast.parse(text, mode="eval").body, node)


def batched(source: str, filename: str) -> Any:
    """Test cell ``source`` compiled with its comprehensions of calls batched (:class:`_Batched`)."""
    tree = _Batched().visit(ast.parse(source, filename))
    return compile(ast.fix_missing_locations(tree), filename, "exec")


class Namespace(dict):
    """The test cell's globals: the grader's own names first, then the notebook's, as proxies."""

    def __init__(self, link: Link, base: dict[str, Any]):
        super().__init__(base)
        self.link = link
        self.fetched: set[str] = set()  # names read from the kernel (the rest the test defined)

    def __missing__(self, name: str) -> Any:
        if hasattr(builtins, name) or name.startswith("__"):
            raise KeyError(name)
        answer = self.link.request({"op": "name", "name": name})
        if "error" in answer and answer["error"] == "NameError":
            raise KeyError(name)
        value = self.link.ok(answer, name)
        self[name] = value
        self.fetched.add(name)
        return value

    def __contains__(self, name: object) -> bool:
        if dict.__contains__(self, name):
            return True
        try:
            self[name]
        except KeyError:
            return False
        return True

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default

    @contextlib.contextmanager
    def lend(self, replacements: dict[str, Any]) -> Iterator[None]:
        """The student's code calls ``replacements`` (run here) instead of its own, for the block."""
        self.link.lent.update(replacements)
        saved = {name: dict.get(self, name) for name in replacements}
        classes = sorted(n for n, v in replacements.items() if isinstance(v, type))
        self.link.ok(self.link.request({"op": "lend", "names": sorted(replacements), "classes": classes}), "lend")
        dict.update(self, replacements)
        try:
            yield
        finally:
            for name in replacements:  # no longer callable from the kernel
                self.link.lent.pop(name, None)
            self.link.ok(self.link.request({"op": "unlend"}), "unlend")
            for name, value in saved.items():
                if value is None:
                    dict.pop(self, name, None)
                else:
                    dict.__setitem__(self, name, value)


def base_namespace() -> dict[str, Any]:
    """What a test cell may use without the notebook: the libraries the notebooks import."""
    import torch.nn.functional as functional

    return {"__name__": "__main__", "torch": torch, "F": functional, "nn": torch.nn, "math": math,
            "__course_calls__": calls_of}


def run_test(link: Link, source: str, grade_id: str, reference: Path | None = None) -> tuple[str, str, str]:
    """Run test cell ``source`` here against the kernel behind ``link`` (``reference``: the folder
    holding ``course_reference``, which the test imports its checks from).

    Returns ``(ename, evalue, printed)``: ``ename`` is '' when the test passed; otherwise the
    exception's name and its one-line message. ``printed`` is what the test printed.
    """
    if reference is not None and str(Path(reference).resolve()) not in sys.path:
        sys.path.insert(0, str(Path(reference).resolve()))
    base = base_namespace()
    ns = Namespace(link, {**base, **link.carried})
    printed = io.StringIO()
    link.rng = None  # the notebook's cells ran since the last test
    link.output = printed  # the student's own prints, among the test's (as in the kernel)
    try:
        with contextlib.redirect_stdout(printed), torch.random.fork_rng():
            # A test cell's own random inputs (`torch.randn` in a visible test) are the same at every run: a
            # judge's process starts with a random seed, which gave an answer that is wrong by a little the
            # test's point now and then (07's LabelSmoothingLoss spread over V-1 classes: 1 run in 100).
            torch.manual_seed(zlib.crc32(grade_id.encode()))
            exec(batched(source, f"<test cell {grade_id}>"), ns)  # noqa: S102 (the grader's own test code)
    except LinkBroken as exc:
        return "LinkBroken", str(exc), printed.getvalue()
    except Exception as exc:  # noqa: BLE001 (the verdict)
        return type(exc).__name__, " ".join(str(exc).split()), printed.getvalue()
    finally:
        # What the test cell defined (a helper, a corpus) is there for the next test cells, as it
        # would be in the kernel; the kernel's objects it read are released now, so they are not.
        for name, value in list(dict.items(ns)):
            if isinstance(value, Remote) or name in ns.fetched:
                dict.pop(ns, name)
            elif name not in base and not name.startswith("__"):
                link.carried[name] = value
        link.attached.clear()  # the objects they stand for are released now
        link.proxies.clear()
        link.borrowed.clear()
        link.approved.clear()
        link._borrowed_ids.clear()
        link.kept.clear()
        with contextlib.suppress(Exception):
            link.request({"op": "unlend"})
            link.request({"op": "release"})
        with contextlib.suppress(LinkBroken):
            link.finish()
        link.output = None
    return "", "", printed.getvalue()
