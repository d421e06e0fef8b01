"""The student's kernel as the judge sees it: proxies of its objects, its errors, its gradients.

A test cell runs in the grader (:mod:`.judge`); each name the notebook defined is a :class:`Remote`
that asks the kernel (through a :class:`~.link.Link`) for whatever is done to it: an attribute, a
call, an item, its length. A call's answer comes back with the kernel's RNG state and, where it is
differentiable, joined to the call's inputs here (:class:`_Through`), so that ``backward`` runs
through the kernel's own graph. The student's exception is raised here as it was there
(:func:`remote_error`).
"""

from __future__ import annotations

import builtins
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch


class LinkBroken(Exception):
    """The kernel did not answer (it died, or a request ran past its time)."""


class _Through(torch.autograd.Function):
    """Joins a call's outputs here to its inputs here: backward asks the kernel to run backward
    through the call's own graph there (its parameters' gradients accumulate there) and returns the
    gradients its copies of the inputs got."""

    @staticmethod
    def forward(ctx: Any, link: Any, call: int, count: int, _anchor: torch.Tensor, *tensors: torch.Tensor) -> Any:
        ctx.link, ctx.call, ctx.count = link, call, count
        outputs = tensors[count:]
        return tuple(o.detach().clone() for o in outputs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> Any:
        link = ctx.link
        answer = link.request({"op": "vjp", "call": ctx.call,
                               "grads": [None if g is None else g.detach() for g in grads]})
        found = link.ok(answer, "backward")
        found = list(found) if isinstance(found, list | tuple) else []
        found += [None] * (ctx.count - len(found))
        leaf_grads = [g if isinstance(g, torch.Tensor) else None for g in found[:ctx.count]]
        return (None, None, None, None, *leaf_grads, *[None] * len(grads))


def _through(link: Any, call: int, value: Any, leaves: list[torch.Tensor]) -> Any:
    """``value`` with its floating-point tensors made outputs of :class:`_Through`."""
    outputs: list[torch.Tensor] = []

    def collect(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            outputs.append(v)
        return v

    _map(value, collect)
    if not outputs:
        return value
    anchor = torch.zeros((), requires_grad=True, device="cpu")  # so the outputs need grad even when no input does
    joined = iter(_Through.apply(link, call, len(leaves), anchor, *leaves, *[o.detach() for o in outputs]))

    def swap(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return next(joined)
        return v

    return _map(value, swap)


def _default_device() -> torch.device:
    """The device tensors made without ``device=`` go to here (a ``with torch.device(...)`` block)."""
    getter = getattr(torch, "get_default_device", None)  # torch >= 2.3
    return getter() if getter is not None else torch.empty(0).device


def _map(value: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(value, tuple | list):
        return type(value)(_map(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    return fn(value)


def remote_error(answer: dict) -> Exception:
    """The student's exception, raised here as it was there: the same built-in class (a visible test
    may expect a ValueError), or a class of the same name, with the same message."""
    name, message = str(answer.get("error") or "Exception"), str(answer.get("message", ""))
    if answer.get("not_implemented"):
        return NotImplementedError(message)
    if name == "ReferenceUsed":
        return AssertionError(message)
    found = getattr(builtins, name, None)
    if isinstance(found, type) and issubclass(found, Exception) and found not in (LinkBroken,):
        with contextlib.suppress(Exception):
            return found(message)
    if not name.isidentifier():
        name = "Exception"
    return type(name, (Exception,), {"__module__": "student"})(message)


class Remote:
    """An object of the student's kernel, named by a handle."""

    def __init__(self, link: Any, handle: int, label: str, type_name: str = ""):
        object.__setattr__(self, "_link", link)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_type", type_name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        link, label = object.__getattribute__(self, "_link"), object.__getattribute__(self, "_label")
        answer = link.request({"op": "getattr", "h": object.__getattribute__(self, "_handle"), "attr": name})
        return link.attach(link.ok(answer, f"{label}.{name}"))

    def __setattr__(self, name: str, value: Any) -> None:
        link = object.__getattribute__(self, "_link")
        answer = link.request({"op": "setattr", "h": object.__getattribute__(self, "_handle"), "attr": name,
                               "value": link.send(value)})
        link.ok(answer, f"setting {object.__getattribute__(self, '_label')}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The call, run in the kernel as if here: with this process's RNG state (which then moves on
        as the kernel's did), and with gradients flowing back through it to the tensors passed in."""
        link, label = object.__getattribute__(self, "_link"), object.__getattribute__(self, "_label")
        watch = watching()
        leaves: list[torch.Tensor] = []
        rng = torch.random.get_rng_state()
        # The kernel's RNG state is sent only when it is not the one the kernel already has.
        same = link.rng is not None and torch.equal(rng, link.rng)
        # (Not from inside a call back: its state would come back with the outer call's answer.)
        moving = {} if link._depth else link.movable((args, kwargs))
        answer = link.request({"op": "call", "h": object.__getattribute__(self, "_handle"),
                               "args": link.send(list(args), leaves, moving),
                               "kwargs": link.send(kwargs, leaves, moving),
                               "watch": sorted(watch), "rng": None if same else rng,
                               "device": str(_default_device())})
        if moving:
            try:
                link.moved_back(moving, answer.get("optimizers"))
            except Exception as exc:  # noqa: BLE001 (the kernel's answer, malformed)
                raise LinkBroken(f"the optimizer's state could not be read back ({type(exc).__name__})") from None
        return _called(link, link.ok(answer, label), rng, watch, leaves)

    def _course_map(self, calls: list[tuple[tuple, dict]]) -> list[Any]:
        """``[self(*args, **kwargs) for args, kwargs in calls]`` in one request (``calls``: plain values
        only): the kernel makes the calls one after another, as it would one request each, and the first
        that raises ends them; its error is raised here once the results before it are taken in."""
        link, label = object.__getattribute__(self, "_link"), object.__getattribute__(self, "_label")
        watch = watching()
        rng = torch.random.get_rng_state()
        same = link.rng is not None and torch.equal(rng, link.rng)
        answer = link.request({"op": "map", "h": object.__getattribute__(self, "_handle"),
                               "calls": [[list(args), kwargs] for args, kwargs in calls], "watch": sorted(watch),
                               "rng": None if same else rng, "device": str(_default_device())})
        mapped = link.ok(answer, label)
        done = mapped.get("__mapped__") if isinstance(mapped, dict) else None
        if not isinstance(done, list) or len(done) > len(calls) or (len(done) < len(calls)) != ("error" in mapped):
            raise LinkBroken("the kernel's answer to a series of calls is not one")
        results = []
        for called in done:
            results.append(_called(link, called, rng, watch, []))
            rng = torch.random.get_rng_state()
        if "error" in mapped:
            raise remote_error(mapped["error"] if isinstance(mapped["error"], dict) else {})
        return results

    def __len__(self) -> int:
        link = object.__getattribute__(self, "_link")
        found = link.ok(link.request({"op": "len", "h": object.__getattribute__(self, "_handle")}), "len")
        if not isinstance(found, int):
            raise LinkBroken("len() is not a number")
        return found

    def __getitem__(self, key: Any) -> Any:
        link = object.__getattribute__(self, "_link")
        answer = link.request({"op": "getitem", "h": object.__getattribute__(self, "_handle"), "key": link.send(key)})
        return link.attach(link.ok(answer, f"{object.__getattribute__(self, '_label')}[{key!r}]"))

    def __iter__(self) -> Iterator[Any]:
        link = object.__getattribute__(self, "_link")
        answer = link.request({"op": "list", "h": object.__getattribute__(self, "_handle")})
        yield from link.attach(link.ok(answer, object.__getattribute__(self, "_label")))

    def __repr__(self) -> str:
        return f"<your {object.__getattribute__(self, '_label')}>"

    @property
    def __class__(self) -> type:  # noqa: D105 (isinstance(proxy, nn.Linear) asks this)
        """The remote object's class where it is one of torch's (``isinstance`` in test code), else Remote."""
        name = object.__getattribute__(self, "_type")
        if name.startswith("torch."):
            with contextlib.suppress(Exception):
                from transformer_course.grading.kernel.operations import _resolve

                found = _resolve(name)
                if isinstance(found, type):
                    return found
        return Remote

    def _course_is(self, cls: type) -> bool:
        """``isinstance(the remote object, cls)``, asked in the kernel."""
        link = object.__getattribute__(self, "_link")
        return link.ok(link.request({"op": "isinstance", "h": object.__getattribute__(self, "_handle"),
                                     "cls": f"{cls.__module__}.{cls.__qualname__}"}), "isinstance") is True


def _called(link: Any, called: Any, rng: torch.Tensor, watch: dict[str, str], leaves: list[torch.Tensor]) -> Any:
    """The value of one call the kernel made (its answer ``called``), with this process's RNG moved on
    as the kernel's was (``rng``: the state the call started from), watched built-ins reported, and
    gradients flowing back through it to ``leaves``."""
    if not isinstance(called, dict) or not called.get("__called__"):
        raise LinkBroken("the kernel's answer to a call is not one")
    link.rng = rng
    if isinstance(called.get("rng"), torch.Tensor):
        with contextlib.suppress(Exception):
            torch.random.set_rng_state(called["rng"].detach().clone())
            link.rng = torch.random.get_rng_state()
    value = called.get("result")
    if isinstance(value, dict) and value.get("__watched__"):
        report_used([watch[u] for u in value["used"] if u in watch])
        value = value["result"]
    if called.get("differentiable") and torch.is_grad_enabled():
        value = _through(link, int(called["call"]), value, leaves)
    return value


def watching() -> dict[str, str]:
    """The built-ins watched by the checks' ``forbid`` right now, by dotted path: their labels."""
    checks = sys.modules.get("course_reference.checks")
    return dict(checks.watched()) if checks is not None and hasattr(checks, "watched") else {}


def report_used(labels: list[str]) -> None:
    checks = sys.modules.get("course_reference.checks")
    if checks is not None and labels:
        checks.note_used(labels)
