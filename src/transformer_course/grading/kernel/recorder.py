"""The grading kernel's half of the judge (:mod:`.judge`): it calls the student's code and reports
what comes back. It holds no reference, no expected value and no verdict.

The grader executes this file's source in the student's kernel (it is never imported there) and
then sends one request per operation: look up a name the notebook defined, read or set an
attribute, call a function or a module, run ``backward``, copy parameters in. Arguments and
results travel as text (:func:`encode`): a message of plain numbers and strings, the most common, as
a Python literal (:func:`literal`); one of plain values and dense tensors as the tensors' bytes and a
literal (:func:`raw`); anything else as ``torch.save`` bytes (base64) that the grader reads back with
``weights_only=True``. Tensors, numbers, strings, dtypes and containers of them go by value; every
other object (a function, a module, a class) by a numbered handle the grader can name in later
requests. A function the grader lends for the length of a test (an earlier exercise's reference,
so that a mistake there is not charged twice) is a stub here that asks the grader for its result
over the kernel's stdin channel, forward and backward.

Everything here runs in a process the student controls: it can be changed, and then the student's
code simply seems to return something else. The verdict is the grader's, from those results.
"""

from __future__ import annotations

import ast
import base64
import builtins
import contextlib
import io
import math
import sys
import traceback
from typing import Any

import torch

PROMPT = "course-judge:"  # a stdin prompt that carries a call back to the grader
ANSWER = "course-judge-answer:"  # a stdin prompt that carries the answer to a request
MAX_ANSWER_CHARS = 200_000_000  # base64 characters of one answer (tests use small inputs)


LITERAL = "~"  # marks a message written as a Python literal (never the first character of base64)
MAX_LITERAL = 65_536  # characters: small messages only (one call's numbers); the rest go as torch.save's archive
TENSORS = "^"  # marks plain values and raw tensors (base64, then "|" and the literal; never base64's first character)
RAW_DTYPES = {str(d): d for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64,
                                  torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)}
_SCALARS = (type(None), bool, int, str)


def plain(value: Any, budget: list[int] | None = None, depth: int = 0) -> bool:
    """Whether ``value`` is made of ``None``, bools, ints, finite floats and strings, in lists, tuples
    and dicts keyed by strings or ints, exactly those types (no subclass: its ``repr`` could be anything),
    at most 2,000 of them nested at most 32 deep: what ``repr`` writes and ``ast.literal_eval`` reads
    back unchanged."""
    budget = [2000] if budget is None else budget
    budget[0] -= 1
    kind = type(value)
    if budget[0] < 0 or depth > 32:
        return False
    if kind in _SCALARS:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list or kind is tuple:
        return all(plain(v, budget, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) in (str, int) and plain(v, budget, depth + 1) for k, v in value.items())
    return False


def literal(text: str) -> Any:
    """A message :func:`encode` wrote as a literal, read with ``ast.literal_eval`` (no code runs) and
    checked to be :func:`plain` (else ValueError)."""
    if len(text) > MAX_LITERAL + len(LITERAL):
        raise ValueError("a literal message longer than any the grader writes")
    try:
        value = ast.literal_eval(text[len(LITERAL):])
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not a literal message ({type(exc).__name__})") from None
    if not plain(value):
        raise ValueError("a literal message with more than plain values")
    return value


class _NotRaw(Exception):
    """A value :func:`encode` cannot write as plain values and raw tensors."""


def _rawable(t: torch.Tensor) -> bool:
    """Whether ``t`` is written exactly by its dtype, shape and bytes: a plain dense CPU tensor, not
    requiring grad, that owns the whole of its storage (no view), with nothing else torch.save keeps."""
    return (type(t) is torch.Tensor and t.layout is torch.strided and t.device.type == "cpu"
            and str(t.dtype) in RAW_DTYPES and not t.requires_grad and t.is_contiguous()
            and t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.numel() * t.element_size()
            and not t.is_conj() and not t.is_neg() and not t.__dict__)


def _parts(value: Any) -> tuple[Any, list[torch.Tensor]]:
    """``value`` with each tensor replaced by ``b"<its index>"`` (bytes: never a :func:`plain` value),
    and the tensors; :class:`_NotRaw` where it holds anything else, or one tensor's storage twice."""
    tensors: list[torch.Tensor] = []
    storages: set[int] = set()
    budget = [2000]

    def walk(v: Any, depth: int) -> Any:
        budget[0] -= 1
        kind = type(v)
        if budget[0] < 0 or depth > 32:
            raise _NotRaw
        if kind in _SCALARS or (kind is float and math.isfinite(v)):
            return v
        if kind is list or kind is tuple:
            items = [walk(x, depth + 1) for x in v]
            return items if kind is list else tuple(items)
        if kind is dict and all(type(k) in (str, int) for k in v):
            return {k: walk(x, depth + 1) for k, x in v.items()}
        if kind is torch.Tensor and _rawable(v):
            storage = v.untyped_storage().data_ptr() if v.numel() else id(v)
            if storage in storages:  # torch.save would keep the two sharing it
                raise _NotRaw
            storages.add(storage)
            tensors.append(v)
            return str(len(tensors) - 1).encode()
        raise _NotRaw

    return walk(value, 0), tensors


def encode(value: Any) -> str:
    """``value`` as text: a Python literal where it is plain values only; plain values and raw tensors
    (:data:`TENSORS`) where those are all it holds; else ``torch.save``'s archive, in base64."""
    try:
        skeleton, tensors = _parts(value)
        text = repr(skeleton if not tensors else (skeleton, [[str(t.dtype), list(t.shape)] for t in tensors]))
    except (_NotRaw, ValueError):  # ValueError: an int of more digits than repr writes
        text = ""
    if text and len(text) <= MAX_LITERAL:  # both a few times faster than torch.save and torch.load
        if not tensors:
            return LITERAL + text
        data = b"".join(t.reshape(-1).view(torch.uint8).numpy().tobytes() for t in tensors)
        return TENSORS + base64.b64encode(data).decode() + "|" + text
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return base64.b64encode(buffer.getvalue()).decode()


def raw(text: str) -> Any:
    """A message :func:`encode` wrote as plain values and raw tensors (:data:`TENSORS`), read without
    unpickling anything: the literal with ``ast.literal_eval``, each tensor from its dtype (one of
    :data:`RAW_DTYPES`), its shape and exactly its share of the bytes; else ValueError."""
    data, bar, rest = text[len(TENSORS):].partition("|")
    if not bar or len(rest) > MAX_LITERAL:
        raise ValueError("not a message of plain values and tensors")
    try:
        skeleton, table = ast.literal_eval(rest)
        payload = bytearray(base64.b64decode(data, validate=True))
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not a message of plain values and tensors ({type(exc).__name__})") from None
    if type(table) is not list or not plain(table):
        raise ValueError("a message's table of tensors is not one")
    tensors, start = [], 0
    for entry in table:
        if (type(entry) is not list or len(entry) != 2 or entry[0] not in RAW_DTYPES or type(entry[1]) is not list
                or len(entry[1]) > 64 or not all(type(n) is int and 0 <= n < 2**31 for n in entry[1])):
            raise ValueError("a tensor of a message is not described by a dtype and a shape")
        dtype = RAW_DTYPES[entry[0]]
        size = math.prod(entry[1]) * dtype.itemsize
        if start + size > len(payload):  # before anything is allocated for it
            raise ValueError("a message's tensors need more bytes than it has")
        tensor = torch.empty(entry[1], dtype=dtype)
        if size:
            tensor.reshape(-1).view(torch.uint8).copy_(torch.frombuffer(payload, dtype=torch.uint8, count=size,
                                                                        offset=start))
        tensors.append(tensor)
        start += size
    if start != len(payload):
        raise ValueError("a message's bytes are not those of its tensors")
    used: set[int] = set()

    def fill(v: Any, depth: int) -> Any:
        kind = type(v)
        if depth > 32:
            raise ValueError("a message nested too deeply")
        if kind is bytes:
            index = int(v) if v.isdigit() and len(v) < 6 and str(int(v)).encode() == v else -1
            if not 0 <= index < len(tensors) or index in used:
                raise ValueError("a message names a tensor it does not have, or one twice")
            used.add(index)
            return tensors[index]
        if kind is list or kind is tuple:
            items = [fill(x, depth + 1) for x in v]
            return items if kind is list else tuple(items)
        if kind is dict:
            return {k: fill(x, depth + 1) for k, x in v.items()}
        return v

    value = fill(skeleton, 0)
    if len(used) != len(tensors) or not plain(_without_tensors(value)):
        raise ValueError("a message with more than plain values and its tensors")
    return value


def _without_tensors(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return None
    if type(value) is list or type(value) is tuple:
        return [_without_tensors(v) for v in value]
    if type(value) is dict:
        return {k: _without_tensors(v) for k, v in value.items()}
    return value


def decode(text: str) -> Any:
    if text.startswith(LITERAL):
        return literal(text)
    if text.startswith(TENSORS):
        return raw(text)
    return torch.load(io.BytesIO(base64.b64decode(text, validate=True)), weights_only=True)


PLAIN = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device)


class Recorder:
    """Handles to the student's objects, and the operations the grader may ask for."""

    def __init__(self, ns: dict, watched: tuple[str, ...] = ()) -> None:
        """``watched``: folders whose code must not run for the student (a notebook's hidden reference,
        while the kernel can still see it): a call that runs any of it is reported."""
        from IPython import get_ipython

        self.watched = tuple(watched)
        # Answers go over the kernel's stdin channel, through the kernel object itself: a notebook
        # that silences its displays or replaces input() does not silence the recorder by accident.
        self.raw_input = _stdin_round_trip(get_ipython().kernel)
        self.ns = ns
        self.handles: dict[int, Any] = {}
        self.ids: dict[int, int] = {}  # id(object) -> its handle, while held
        self.count = 0
        self.lent: dict[str, Any] = {}
        self.leaves: list[torch.Tensor] = []  # the current call's inputs that need gradients
        self.calls: dict[int, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        self.missing = object()
        self.borrowed: dict[int, Borrowed] = {}  # the grader's objects passed to the student's code
        self.moved: dict[int, tuple[torch.optim.Optimizer, list[torch.Tensor]]] = {}  # see optimizer()
        self.kept: dict[tuple[int, str], Any] = {}  # attributes of borrowed objects (see Borrowed.__getattr__)
        self.depth = 0  # requests being answered, nested ones included

    # Values out: by value where plain, else by handle.
    def out(self, value: Any) -> Any:
        if type(value) is Borrowed:
            return {"__borrowed__": object.__getattribute__(value, "_course_b")}
        if isinstance(value, torch.Tensor):
            grad = value.grad if value.is_leaf else None
            return {"__tensor__": value.detach().clone(), "__handle__": self.keep(value),
                    "requires_grad": bool(value.requires_grad),
                    "grad": None if grad is None else grad.detach().clone()}
        if isinstance(value, PLAIN):
            return value
        if type(value) in (tuple, list) or isinstance(value, torch.Size):
            return {"__seq__": [self.out(v) for v in value], "tuple": not isinstance(value, list)}
        if type(value) is dict or type(value).__name__ == "OrderedDict":
            if all(isinstance(k, str | int) for k in value):
                return {"__dict__": {k: self.out(v) for k, v in value.items()}}
        return {"__handle__": self.keep(value), "type": f"{type(value).__module__}.{type(value).__qualname__}",
                "module": isinstance(value, torch.nn.Module), "callable": callable(value)}

    def keep(self, value: Any) -> int:
        """The handle of ``value``: the same for the same object while it is held (so ``is`` holds
        across the two processes), never reused for another after a release."""
        if id(value) in self.ids:
            return self.ids[id(value)]
        self.count += 1
        self.handles[self.count] = value
        self.ids[id(value)] = self.count
        return self.count

    # Values in: handles become the objects again.
    def into(self, value: Any) -> Any:
        if isinstance(value, dict):
            if "__ref__" in value:
                return self.handles[value["__ref__"]]
            if "__leaf__" in value:  # a tensor the grader wants gradients for: a leaf of this call
                leaf = value["__leaf__"].detach().clone().requires_grad_()
                self.leaves.append(leaf)
                return leaf
            if "__borrowed__" in value:
                return self.borrowed_proxy(value["__borrowed__"])
            if "__optimizer__" in value:  # one of PyTorch's optimizers, over tensors of this kernel
                return self.optimizer(value)
            if "__gtensor__" in value:  # a tensor of a grader's object (a parameter), with its gradient
                tensor = value["__gtensor__"].detach().clone().requires_grad_(bool(value.get("requires_grad")))
                if isinstance(value.get("grad"), torch.Tensor):
                    tensor.grad = value["grad"]
                return tensor
            if "__seq__" in value:
                items = [self.into(v) for v in value["__seq__"]]
                return tuple(items) if value.get("tuple") else items
            if "__dict__" in value:
                return {k: self.into(v) for k, v in value["__dict__"].items()}
        return value

    def optimizer(self, spec: dict) -> torch.optim.Optimizer:
        """The grader's optimizer rebuilt here for one call (class and state), over the tensors it
        steps, which live here: a training loop's ``step()`` and ``zero_grad()`` then cost no request."""
        if spec["key"] in self.moved:
            return self.moved[spec["key"]][0]
        cls = _resolve(spec["__optimizer__"])
        if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
            raise TypeError(f"{spec['__optimizer__']} is not an optimizer")
        params = [self.handles[h] for h in spec["handles"]]
        state = spec["state"]
        groups, start = [], 0
        for group in state["param_groups"]:
            groups.append({"params": params[start:start + len(group["params"])]})
            start += len(group["params"])
        optimizer = cls(groups, lr=state["param_groups"][0].get("lr", 1e-3))
        optimizer.load_state_dict(state)
        self.moved[spec["key"]] = (optimizer, params)
        return optimizer

    def serve(self) -> None:
        """Carry out requests until the grader sends an empty one. Each answer goes back as a stdin
        prompt (see :data:`ANSWER`) and the grader's reply to it is the next request: one round trip
        per request, where executing each as a cell would cost several."""
        request = self.raw_input(ANSWER + encode({"ok": None}))
        while request:
            request = self.raw_input(ANSWER + self.answer(request))

    def answer(self, request: str) -> str:
        """The encoded answer to one encoded request."""
        printed = io.StringIO()  # the student's prints go with the answer, so they keep their place
        self.kept.clear()  # the grader's code ran since: its objects' attributes are read again
        self.depth += 1  # > 1: a request the grader sent while it answered a call back of this one
        try:
            ask = decode(request)
            with contextlib.redirect_stdout(printed):
                result = self.run(ask)
            answer = {"ok": self.out(result)}
        except BaseException as exc:  # noqa: BLE001 (the student's error is the answer)
            answer = _error(exc)
        if printed.tell():
            answer["printed"] = printed.getvalue()[:100_000]
        self.depth -= 1
        if self.moved and not self.depth:  # the optimizers rebuilt for this call: their state goes back with it
            answer["optimizers"] = {key: {"state": opt.state_dict(),
                                          "values": pack([p.detach() for p in params]),
                                          "grads": pack([p.grad for p in params])}
                                    for key, (opt, params) in self.moved.items()}
            self.moved = {}
        text = encode(answer)
        if len(text) > MAX_ANSWER_CHARS:
            text = encode({"error": "MemoryError", "message": f"the result is too large to grade "
                           f"({len(text) / 1e6:.0f} MB encoded; at most {MAX_ANSWER_CHARS / 1e6:.0f} MB)"})
        return text

    def run(self, ask: dict) -> Any:
        kind = ask["op"]
        if kind == "name":
            if ask["name"] not in self.ns:
                raise NameError(f"name {ask['name']!r} is not defined")
            return self.ns[ask["name"]]
        if kind == "names":
            return [k for k in self.ns if not k.startswith("_")]
        target = self.handles[ask["h"]] if "h" in ask else None
        if kind == "getattr":
            return getattr(target, ask["attr"])
        if kind == "setattr":
            setattr(target, ask["attr"], self.into(ask["value"]))
            return None
        if kind == "call":
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
        if kind == "map":  # one function's calls on plain arguments, one after another, as one request each would
            done = []
            for number, (args, kwargs) in enumerate(ask["calls"]):
                try:
                    done.append(self.run({"op": "call", "h": ask["h"], "args": args, "kwargs": kwargs,
                                          "watch": ask.get("watch"), "rng": None if number else ask.get("rng"),
                                          "device": ask.get("device")}))
                except Exception as exc:  # noqa: BLE001 (the student's error ends the calls, as it would theirs)
                    return {"__mapped__": done, "error": _error(exc)}
            return {"__mapped__": done}
        if kind == "vjp":  # the grader's backward through a call's outputs: .backward() here, as it would be
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
        if kind == "list":
            return list(target)
        if kind == "len":
            return len(target)
        if kind == "getitem":
            return target[self.into(ask["key"])]
        if kind == "isinstance":
            return isinstance(target, _resolve(ask["cls"]))
        if kind == "assign":  # tensors the grader changed in place (values, gradients), written back
            values, grads = ask.get("values") or {}, ask.get("grads") or {}
            with torch.no_grad():
                for handle, value in zip(values.get("handles", []), unpack(values["packed"]) if values else [],
                                         strict=True):
                    self.handles[handle].copy_(value)
            for handle, grad in zip(grads.get("handles", []), unpack(grads["packed"]) if grads else [], strict=True):
                self.handles[handle].grad = grad
            return None
        if kind == "grads":  # the gradients of tensors the grader holds copies of
            return pack([self.handles[h].grad for h in ask["handles"]])
        if kind == "lend":
            classes = set(ask.get("classes") or [])
            for name in ask["names"]:
                self.lent.setdefault(name, self.ns.get(name, self.missing))
                self.ns[name] = self.stub_class(name) if name in classes else self.stub(name)
            return None
        if kind == "unlend":
            for name, value in self.lent.items():
                if value is self.missing:
                    self.ns.pop(name, None)
                else:
                    self.ns[name] = value
            self.lent.clear()
            return None
        if kind == "release":
            self.handles.clear()
            self.ids.clear()
            self.calls.clear()
            self.borrowed.clear()
            return None
        raise ValueError(f"unknown request {kind!r}")

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

    def stub(self, name: str) -> Any:
        """A function that asks the grader for ``name(*args, **kwargs)``, with gradients."""
        recorder = self

        class Lent(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, spec: Any, _anchor: Any, *tensors: torch.Tensor) -> Any:
                args, kwargs = _fill(spec, tensors)
                reply = recorder.ask({"callback": name, "args": recorder.out(args),
                                      "kwargs": recorder.out(kwargs)})
                ctx.call = reply["call"]
                ctx.count = len(tensors)
                outputs = tuple(recorder.into(v) for v in reply["outputs"])
                still = [o for o, d in zip(outputs, reply.get("differentiable") or [True] * len(outputs), strict=False)
                         if isinstance(o, torch.Tensor) and not d]
                if still:
                    ctx.mark_non_differentiable(*still)
                return outputs if reply["tuple"] else outputs[0]

            @staticmethod
            def backward(ctx: Any, *grads: torch.Tensor) -> Any:
                reply = recorder.ask({"vjp": ctx.call, "grads": [None if g is None else g.detach() for g in grads]})
                return (None, None, *[recorder.into(g) for g in reply["grads"]])

        def lent(*args: Any, **kwargs: Any) -> Any:
            spec, tensors = _split((args, kwargs))
            # A grader's object (a model) may hold parameters of its own: its outputs need gradients
            # even when no input has one, so the call gets an input that always does.
            anchor = torch.zeros((), requires_grad=True) if name.startswith("#") and torch.is_grad_enabled() else None
            return Lent.apply(spec, anchor, *tensors)

        lent.__name__ = lent.__qualname__ = name
        return lent

    def stub_class(self, name: str) -> Any:
        """A stand-in for the module class ``name``: an instance has the reference module's parameters
        and buffers, here (so they train, move and load as the student's own), and its forward pass
        is the grader's, on them, with gradients for both."""
        recorder = self

        class Forward(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, info: tuple, *tensors: torch.Tensor) -> Any:
                module, spec, count, names, buffers, training = info
                args, kwargs = _fill(spec, tensors[:count])
                reply = recorder.ask({"module_forward": module, "args": recorder.out(args),
                                      "kwargs": recorder.out(kwargs), "training": training,
                                      "params": [[n, t.detach()] for n, t in zip(names, tensors[count:], strict=True)],
                                      "buffers": buffers, "rng": torch.random.get_rng_state()})
                torch.random.set_rng_state(reply["rng"])
                ctx.call = reply["call"]
                outputs = tuple(recorder.into(v) for v in reply["outputs"])
                return outputs if reply["tuple"] else outputs[0]

            @staticmethod
            def backward(ctx: Any, *grads: torch.Tensor) -> Any:
                reply = recorder.ask({"vjp": ctx.call, "grads": [None if g is None else g.detach() for g in grads]})
                return (None, *[recorder.into(g) for g in reply["grads"]])

        class LentModule(torch.nn.Module):
            def forward(self, *args: Any, **kwargs: Any) -> Any:
                spec, tensors = _split((args, kwargs))
                named = list(self.named_parameters())
                buffers = {n: b.detach() for n, b in self.named_buffers()}
                info = (self._course_module, spec, len(tensors), [n for n, _ in named], buffers, self.training)
                return Forward.apply(info, *tensors, *[p for _, p in named])

        def construct(*args: Any, **kwargs: Any) -> Any:
            reply = recorder.ask({"construct": name, "args": recorder.out(args), "kwargs": recorder.out(kwargs),
                                  "rng": torch.random.get_rng_state()})
            torch.random.set_rng_state(reply["rng"])
            module = LentModule()
            module._course_module = reply["module"]
            for dotted, value in reply["params"]:
                _place(module, dotted, torch.nn.Parameter(value.clone()))
            for dotted, value in reply["buffers"]:
                _place(module, dotted, value.clone(), buffer=True)
            return module

        construct.__name__ = construct.__qualname__ = name
        return construct

    def borrowed_proxy(self, number: int) -> Any:
        if number not in self.borrowed:
            proxy = object.__new__(Borrowed)
            object.__setattr__(proxy, "_course_b", number)
            object.__setattr__(proxy, "_course_r", self)
            object.__setattr__(proxy, "_course_methods", {})
            self.borrowed[number] = proxy
        return self.borrowed[number]

    def ask(self, question: dict) -> dict:
        """The grader's reply to ``question``. While it works on it, the grader may send requests
        of its own (reading or writing back the student's objects): they are answered first."""
        reply = decode(self.raw_input(PROMPT + encode(question)))
        while isinstance(reply, dict) and "__request__" in reply:
            reply = decode(self.raw_input(ANSWER + self.answer(reply["__request__"])))
        for number, name in reply.get("forget") or []:  # attributes the grader's code changed meanwhile
            self.kept.pop((number, name), None)
        if "error" in reply:  # raised in the student's code with its built-in class where it has one
            name, _, message = str(reply["error"]).partition(": ")
            cls = getattr(builtins, name, None)
            if isinstance(cls, type) and issubclass(cls, Exception) and cls not in (SystemExit, KeyboardInterrupt):
                raise cls(message)
            raise RuntimeError(reply["error"])
        return reply


class Borrowed:
    """One of the grader's objects passed to the student's code (a model, an optimizer, a loss
    function of a test): its attributes, calls and iteration are the grader's, asked for each
    time; a call's tensors keep their gradients across (see ``Recorder.stub``)."""

    def _course_ask(self, **question: Any) -> Any:
        recorder = object.__getattribute__(self, "_course_r")
        number = object.__getattribute__(self, "_course_b")
        return recorder.into(recorder.ask({"borrowed": number, **question})["value"])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        methods = object.__getattribute__(self, "_course_methods")
        if name in methods:
            return methods[name]
        recorder = object.__getattribute__(self, "_course_r")
        number = object.__getattribute__(self, "_course_b")
        if (number, name) in recorder.kept:
            return recorder.kept[(number, name)]
        reply = recorder.ask({"borrowed": number, "getattr": name})
        value = recorder.into(reply["value"])
        if reply.get("stable") is True:  # a method of the object's class: the same on every read
            methods[name] = value
        elif reply.get("keep") is True:  # kept until the grader says it changed, or sends a request
            recorder.kept[(number, name)] = value
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        recorder = object.__getattribute__(self, "_course_r")
        recorder.kept.pop((object.__getattribute__(self, "_course_b"), name), None)
        Borrowed._course_ask(self, setattr=name, value=recorder.out(value))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        recorder = object.__getattribute__(self, "_course_r")
        return recorder.stub(f"#{object.__getattribute__(self, '_course_b')}")(*args, **kwargs)

    def __iter__(self) -> Any:
        return iter(Borrowed._course_ask(self, list=True))

    def __next__(self) -> Any:
        found = Borrowed._course_ask(self, next=True)
        if not found:
            raise StopIteration
        return found[0]

    def __len__(self) -> int:
        return Borrowed._course_ask(self, len=True)

    def __bool__(self) -> bool:  # `if scheduler:` asks the object, as Python would (not its len())
        return Borrowed._course_ask(self, bool=True)

    def __getitem__(self, key: Any) -> Any:
        recorder = object.__getattribute__(self, "_course_r")
        return Borrowed._course_ask(self, getitem=recorder.out(key))

    def __repr__(self) -> str:
        return f"<the grader's {Borrowed._course_ask(self, type=True)}>"


def _stdin_round_trip(kernel: Any) -> Any:
    """``kernel.raw_input``, without what it does for a person at a keyboard: flushing stdout and
    stderr through the kernel's output thread before each prompt, and polling in 10 ms steps. A
    request is then one message each way (a few times faster). Falls back to ``raw_input`` where
    this kernel's internals differ from ipykernel 6-7's."""
    try:
        import zmq

        session, socket = kernel.session, kernel.stdin_socket
        parent_ident, get_parent = kernel._shell_parent_ident, kernel.get_parent
        shell_ident = kernel._get_shell_context_var
    except AttributeError:
        return kernel.raw_input

    def round_trip(prompt: str) -> str:
        with contextlib.suppress(zmq.ZMQError):
            while True:  # stale replies (an interrupted request's) are dropped, as raw_input does
                socket.recv_multipart(zmq.NOBLOCK)
        session.send(socket, "input_request", {"prompt": prompt, "password": False}, get_parent("shell"),
                     ident=shell_ident(parent_ident))
        while True:
            if socket.poll(100):  # a timeout, so that an interrupt (KeyboardInterrupt) gets through
                _, reply = session.recv(socket)
                if reply is not None:
                    value = reply.get("content", {}).get("value", "")
                    if value == "\x04":
                        raise EOFError
                    return value

    return round_trip


def pack(tensors: list[torch.Tensor | None]) -> Any:
    """Tensors (or None) as one flat tensor per dtype and their shapes: a message of many small
    tensors (a model's gradients) costs the reader one tensor each, this a few."""
    groups: dict[str, list[torch.Tensor]] = {}
    layout = []
    for t in tensors:
        if t is None:
            layout.append(None)
            continue
        key = str(t.dtype)
        groups.setdefault(key, []).append(t.detach().reshape(-1))
        layout.append([key, list(t.shape)])
    return {"__packed__": {k: torch.cat(v) for k, v in groups.items()}, "layout": layout}


def unpack(packed: Any) -> list[torch.Tensor | None]:
    flats, offsets, out = packed["__packed__"], {}, []
    for entry in packed["layout"]:
        if entry is None:
            out.append(None)
            continue
        key, shape = entry
        start = offsets.get(key, 0)
        size = math.prod(int(n) for n in shape)
        out.append(flats[key][start:start + size].reshape(shape).clone())
        offsets[key] = start + size
    return out


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


def _place(module: torch.nn.Module, dotted: str, value: torch.Tensor, buffer: bool = False) -> None:
    """Put ``value`` at ``dotted`` (``"w_1.weight"``) in ``module``, making the submodules on the way."""
    *path, last = dotted.split(".")
    for part in path:
        if not isinstance(getattr(module, part, None), torch.nn.Module):
            module.add_module(part, torch.nn.Module())
        module = getattr(module, part)
    if buffer:
        module.register_buffer(last, value)
    else:
        module.register_parameter(last, value)


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value`` (nested tuples, lists and dicts), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple | list):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _split(value: Any) -> tuple[Any, list[torch.Tensor]]:
    """``value`` with its tensors replaced by their positions in the returned list."""
    tensors: list[torch.Tensor] = []

    def walk(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            tensors.append(v)
            return ("__tensor_at__", len(tensors) - 1)
        if isinstance(v, tuple | list):
            return type(v)(walk(x) for x in v)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    return walk(value), tensors


def _fill(spec: Any, tensors: tuple[torch.Tensor, ...]) -> Any:
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "__tensor_at__":
        return tensors[spec[1]]
    if isinstance(spec, tuple | list):
        return type(spec)(_fill(x, tensors) for x in spec)
    if isinstance(spec, dict):
        return {k: _fill(x, tensors) for k, x in spec.items()}
    return spec


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
