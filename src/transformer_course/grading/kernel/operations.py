"""The operations the grader asks for, as the recorder carries them out in the kernel: a handler each.

A request is a dict whose ``"op"`` names its kind; :meth:`Operations.run` finds its handler in
:data:`REQUESTS` and calls it on the object the request names (``"h"``, a handle), its result
going back as the answer. A call (:meth:`Operations.call`) reports the built-ins it was asked to
watch and whether the student's code ran the hidden reference. Run in the kernel as text after
:mod:`.wire`'s and :mod:`.lent`'s, never imported there.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from typing import Any

import torch

if __name__ != "course_judge":  # imported by the grader; in the kernel, the texts before this one ran in this namespace
    from transformer_course.grading.kernel.wire import pack, unpack


class Operations:
    """:class:`~.recorder.Recorder`'s handlers of the grader's requests (on its ``ns``, ``handles``,
    ``calls``, ``lent``, ...)."""

    def run(self, ask: dict) -> Any:
        """The result of request ``ask``, by its kind's handler in :data:`REQUESTS`."""
        kind = ask["op"]
        handler = REQUESTS.get(kind) if isinstance(kind, str) else None
        # The notebook's names first; every other kind reads the object it names (a handle) before it runs.
        target = None if kind in ("name", "names") else self.handles[ask["h"]] if "h" in ask else None
        if handler is None:
            raise ValueError(f"unknown request {kind!r}")
        return handler(self, ask, target)

    def _name(self, ask: dict, target: Any) -> Any:
        if ask["name"] not in self.ns:
            raise NameError(f"name {ask['name']!r} is not defined")
        return self.ns[ask["name"]]

    def _names(self, ask: dict, target: Any) -> Any:
        return [k for k in self.ns if not k.startswith("_")]

    def _getattr(self, ask: dict, target: Any) -> Any:
        return getattr(target, ask["attr"])

    def _setattr(self, ask: dict, target: Any) -> Any:
        setattr(target, ask["attr"], self.into(ask["value"]))
        return None

    def _call(self, ask: dict, target: Any) -> Any:
        self.leaves = []
        args, kwargs = self.into(ask.get("args", [])), self.into(ask.get("kwargs", {}))
        leaves = self.leaves
        if isinstance(ask.get("rng"), torch.Tensor):  # None: the grader's state is this kernel's already
            torch.random.set_rng_state(ask["rng"])
        before = torch.random.get_rng_state()
        device = torch.device(ask.get("device") or "cpu")
        with torch.device(device) if device.type != "cpu" else _nothing():
            result = self.call(target, args, kwargs, ask.get("watch") or [])
        outputs = [t for t in _tensors(result) if t.requires_grad]
        self.count += 1
        self.calls[self.count] = (leaves, outputs)
        return {"__called__": True, "result": result, "call": self.count, "differentiable": bool(outputs),
                "rng": _changed(before, torch.random.get_rng_state())}

    def _map(self, ask: dict, target: Any) -> Any:
        """One function's calls on plain arguments, one after another, as one request each would."""
        done = []
        for number, (args, kwargs) in enumerate(ask["calls"]):
            try:
                done.append(self.run({"op": "call", "h": ask["h"], "args": args, "kwargs": kwargs,
                                      "watch": ask.get("watch"), "rng": None if number else ask.get("rng"),
                                      "device": ask.get("device")}))
            except Exception as exc:  # noqa: BLE001 (the student's error ends the calls, as it would theirs)
                return {"__mapped__": done, "error": _error(exc)}
        return {"__mapped__": done}

    def _vjp(self, ask: dict, target: Any) -> Any:
        """The grader's backward through a call's outputs: .backward() here, as it would be."""
        leaves, outputs = self.calls[ask["call"]]
        grads = [g for g in ask["grads"]]
        pairs = [(o, g) for o, g in zip(outputs, grads, strict=False) if g is not None]
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs], retain_graph=True)
        found = []
        for leaf in leaves:
            found.append(None if leaf.grad is None else leaf.grad.detach().clone())
            leaf.grad = None
        return found

    def _list(self, ask: dict, target: Any) -> Any:
        return list(target)

    def _len(self, ask: dict, target: Any) -> Any:
        return len(target)

    def _getitem(self, ask: dict, target: Any) -> Any:
        return target[self.into(ask["key"])]

    def _isinstance(self, ask: dict, target: Any) -> Any:
        return isinstance(target, _resolve(ask["cls"]))

    def _assign(self, ask: dict, target: Any) -> Any:
        """Tensors the grader changed in place (values, gradients), written back."""
        values, grads = ask.get("values") or {}, ask.get("grads") or {}
        with torch.no_grad():
            for handle, value in zip(values.get("handles", []), unpack(values["packed"]) if values else [],
                                     strict=True):
                self.handles[handle].copy_(value)
        for handle, grad in zip(grads.get("handles", []), unpack(grads["packed"]) if grads else [], strict=True):
            self.handles[handle].grad = grad
        return None

    def _grads(self, ask: dict, target: Any) -> Any:
        """The gradients of tensors the grader holds copies of."""
        return pack([self.handles[h].grad for h in ask["handles"]])

    def _lend(self, ask: dict, target: Any) -> Any:
        classes = set(ask.get("classes") or [])
        for name in ask["names"]:
            self.lent.setdefault(name, self.ns.get(name, self.missing))
            self.ns[name] = self.stub_class(name) if name in classes else self.stub(name)
        return None

    def _unlend(self, ask: dict, target: Any) -> Any:
        for name, value in self.lent.items():
            if value is self.missing:
                self.ns.pop(name, None)
            else:
                self.ns[name] = value
        self.lent.clear()
        return None

    def _release(self, ask: dict, target: Any) -> Any:
        self.handles.clear()
        self.ids.clear()
        self.calls.clear()
        self.borrowed.clear()
        return None

    def call(self, fn: Any, args: list, kwargs: dict, watch: list[str]) -> Any:
        """``fn(*args, **kwargs)``; ``watch`` names built-ins (``"torch.softmax"``) whose use is
        reported back as ``{"result": ..., "used": [...]}``."""
        if not self.watched:
            return self.watched_call(fn, args, kwargs, watch)
        seen: list[str] = []

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call" and not seen and frame.f_code.co_filename.startswith(self.watched):
                seen.append(frame.f_code.co_qualname)

        previous = sys.getprofile()
        sys.setprofile(profile)
        try:
            result = self.watched_call(fn, args, kwargs, watch)
        finally:
            sys.setprofile(previous)
        if seen:
            raise ReferenceUsed(f"it ran the hidden reference implementation ({seen[0]}) instead of your own code")
        return result

    def watched_call(self, fn: Any, args: list, kwargs: dict, watch: list[str]) -> Any:
        if not watch:
            return fn(*args, **kwargs)
        used: list[str] = []
        saved = []
        for label in watch:
            owner_path, attr = label.rsplit(".", 1)
            owner = _resolve(owner_path)
            original = getattr(owner, attr)
            saved.append((owner, attr, original))

            def spy(*a: Any, __original: Any = original, __label: str = label, **k: Any) -> Any:
                used.append(__label)
                return __original(*a, **k)

            setattr(owner, attr, spy)
        try:
            result = fn(*args, **kwargs)
        finally:
            for owner, attr, original in saved:
                setattr(owner, attr, original)
        return {"__watched__": True, "result": result, "used": used}


# Each kind of request the grader sends, and its handler.
REQUESTS = {
    "name": Operations._name,
    "names": Operations._names,
    "getattr": Operations._getattr,
    "setattr": Operations._setattr,
    "call": Operations._call,
    "map": Operations._map,
    "vjp": Operations._vjp,
    "list": Operations._list,
    "len": Operations._len,
    "getitem": Operations._getitem,
    "isinstance": Operations._isinstance,
    "assign": Operations._assign,
    "grads": Operations._grads,
    "lend": Operations._lend,
    "unlend": Operations._unlend,
    "release": Operations._release,
}


def _error(exc: BaseException) -> dict:
    """The student's exception, as the grader reads it (``remote.remote_error``)."""
    return {"error": type(exc).__name__, "message": str(exc)[:2000],
            "not_implemented": isinstance(exc, NotImplementedError),
            "where": "".join(traceback.format_exception_only(type(exc), exc))[-500:]}


def _changed(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor | None:
    """``after``, or None when it is ``before`` (compared as bytes: the notebook may patch torch.equal)."""
    return None if before.numpy().tobytes() == after.numpy().tobytes() else after


@contextlib.contextmanager
def _nothing() -> Any:
    yield


class ReferenceUsed(Exception):
    """The student's code ran the hidden reference (see ``Recorder.watched``)."""



def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value`` (nested tuples, lists and dicts), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple | list):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []



def _resolve(path: str) -> Any:
    import importlib

    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(path)
