"""Values between the grader and the kernel: what each side gets for the other's objects.

From the kernel (:meth:`Values.value`): tensors and plain data as they are, every other object as
a :class:`~.remote.Remote` proxy. To the kernel (:meth:`Values.send`, :meth:`Values.lend_value`):
proxies by handle, tensors and plain data by value, every other object of the grader's borrowed by
number, only where :mod:`.lending` allows it. An optimizer over the kernel's own parameters can go
there for one call and come back (:meth:`Values.movable`, :meth:`Values.moved_back`).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from transformer_course.grading.judging import lending, sizes
from transformer_course.grading.judging.remote import LinkBroken, Remote, remote_error
from transformer_course.grading.kernel.wire import PLAIN, pack, unpack

_PLAIN = (*PLAIN, slice, type(Ellipsis))  # what goes to the kernel by value (the rest is borrowed)


class Values:
    """The conversion of values, :class:`~.link.Link`'s half without the transport (what it writes back
    goes through the link's requests), on the link's state of one test (``attached``, ``proxies``,
    ``borrowed``, ``approved``)."""

    def attach(self, value: Any) -> Any:
        """Keep the tensors in ``value`` (a module's parameters, read here) tied to their originals:
        if code here changes one in place (``nn.init.eye_(layer.weight)``, ``p.copy_(...)``), the
        original is changed the same way before the kernel runs anything else."""
        # Held (not weakly: `layer.weight.copy_(w)` drops it at once) until released.
        for tensor in sizes.tensors(value):
            handle = getattr(tensor, "_course_handle", None)
            if handle is not None:
                self.attached.append([tensor, handle, tensor._version])
        return value

    def _write_back(self, grads: dict[int, torch.Tensor | None] | None = None) -> None:
        """Write back the tensors changed here in place since they were read (and ``grads``)."""
        changed = {}
        for entry in self.attached:
            tensor, handle, version = entry
            if tensor._version != version:
                changed[handle] = tensor.detach()
                entry[2] = tensor._version
        if changed or grads:
            ask: dict[str, Any] = {"op": "assign"}
            if changed:
                ask["values"] = {"handles": list(changed), "packed": pack(list(changed.values()))}
            if grads:
                ask["grads"] = {"handles": list(grads), "packed": pack(list(grads.values()))}
            self.ok(self._request(ask), "writing back a changed tensor")

    # Values between the two processes.
    def value(self, data: Any, label: str = "") -> Any:
        """A value from the kernel: tensors and plain data as they are, other objects as proxies."""
        if isinstance(data, dict):
            if "__tensor__" in data:
                tensor = data["__tensor__"]
                if not isinstance(tensor, torch.Tensor):
                    raise LinkBroken("a tensor that is not one")
                if data.get("requires_grad") and (tensor.is_floating_point() or tensor.is_complex()):
                    tensor.requires_grad_(True)
                grad = data.get("grad")
                if isinstance(grad, torch.Tensor) and grad.shape == tensor.shape and grad.dtype == tensor.dtype:
                    tensor.grad = grad
                if isinstance(data.get("__handle__"), int):
                    tensor._course_handle = data["__handle__"]
                return tensor
            if "__handle__" in data:  # one proxy per object of the kernel: `a is b` holds as it does there
                handle = data["__handle__"]
                if handle not in self.proxies:
                    self.proxies[handle] = Remote(self, handle, label or str(data.get("type", "object")).rsplit(
                        ".", 1)[-1], str(data.get("type", "")))
                return self.proxies[handle]
            if "__borrowed__" in data and isinstance(data["__borrowed__"], int) \
                    and 0 <= data["__borrowed__"] < len(self.borrowed):
                return self.borrowed[data["__borrowed__"]]
            if "__seq__" in data:
                items = [self.value(v, label) for v in data["__seq__"]]
                return tuple(items) if data.get("tuple") else items
            if "__dict__" in data:
                return {k: self.value(v, label) for k, v in data["__dict__"].items()}
            if "__watched__" in data:
                return {"__watched__": True, "result": self.value(data.get("result"), label),
                        "used": [str(u) for u in data.get("used", [])]}
        return data

    def send(self, value: Any, leaves: list[torch.Tensor] | None = None,
             moving: dict[int, tuple[torch.optim.Optimizer, list[int]]] | None = None) -> Any:
        """A value for the kernel: proxies by handle, lent functions by name, the rest by value.
        A tensor that requires grad goes as a leaf of the call (appended to ``leaves``). An optimizer
        in ``moving`` (see :meth:`movable`) goes as its class and state, to be rebuilt there."""
        if isinstance(value, Remote):
            return {"__ref__": object.__getattribute__(value, "_handle")}
        if moving is not None and id(value) in moving:
            optimizer, handles = moving[id(value)]
            return {"__optimizer__": f"{type(optimizer).__module__}.{type(optimizer).__qualname__}",
                    "state": optimizer.state_dict(), "handles": handles, "key": id(value)}
        if isinstance(value, torch.Tensor):
            if leaves is not None and value.requires_grad and torch.is_grad_enabled():
                leaves.append(value)
                return {"__leaf__": value.detach()}
            return value.detach()
        if isinstance(value, tuple | list):
            return {"__seq__": [self.send(v, leaves, moving) for v in value], "tuple": isinstance(value, tuple)}
        if isinstance(value, dict):
            return {"__dict__": {k: self.send(v, leaves, moving) for k, v in value.items()}}
        if isinstance(value, _PLAIN):
            return value
        return {"__borrowed__": self.borrow(value)}

    def movable(self, values: Any) -> dict[int, tuple[torch.optim.Optimizer, list[int]]]:
        """The optimizers among ``values`` (a call's arguments) that can run in the kernel for the call:
        one of PyTorch's own classes, over tensors of the kernel only (a model's parameters read from
        there), that no other argument holds (a learning-rate scheduler steps the optimizer here).
        Rebuilt there with its state, it steps the kernel's parameters without a request per
        ``step()`` and ``zero_grad()``; its state comes back with the call's answer."""
        found: dict[int, tuple[torch.optim.Optimizer, list[int]]] = {}
        others: list[Any] = []
        current = {id(t): h for t, h, _ in self.attached}

        def visit(v: Any) -> None:
            if isinstance(v, tuple | list):
                for item in v:
                    visit(item)
            elif isinstance(v, dict):
                for item in v.values():
                    visit(item)
            elif isinstance(v, torch.optim.Optimizer) and type(v).__module__.startswith("torch.optim."):
                params = [p for group in v.param_groups for p in group["params"]]
                if params and all(id(p) in current for p in params):
                    found[id(v)] = (v, [current[id(p)] for p in params])
            elif not isinstance(v, (*_PLAIN, torch.Tensor, Remote)):
                others.append(v)

        visit(values)
        for other in others:
            found.pop(id(getattr(other, "optimizer", None)), None)
        return found

    def moved_back(self, moving: dict[int, tuple[torch.optim.Optimizer, list[int]]], states: Any) -> None:
        """The state of the optimizers that ran in the kernel for a call, back into the grader's own
        (and the new values and gradients of their parameters into the copies here)."""
        if not isinstance(states, dict):
            return
        by_handle = {h: entry for entry in self.attached for h in [entry[1]]}
        for key, (optimizer, handles) in moving.items():
            state = states.get(key)
            if not isinstance(state, dict):
                continue
            with contextlib.suppress(Exception):
                optimizer.load_state_dict(state["state"])
            values, grads = unpack(state["values"]), unpack(state["grads"])
            for handle, value, grad in zip(handles, values, grads, strict=True):
                entry = by_handle[handle]
                tensor = entry[0]
                if value is not None and value.shape == tensor.shape and value.dtype == tensor.dtype:
                    with torch.no_grad():
                        tensor.copy_(value)
                tensor.grad = grad if grad is not None and grad.shape == tensor.shape else None
                entry[2] = tensor._version

    def borrow(self, value: Any) -> int:
        """The number under which the kernel knows ``value``, one of the grader's objects (held
        until the test ends, so that the same object keeps its number): only what
        :mod:`.lending` allows."""
        if id(value) not in self.approved:
            lending.check_lend(value)
        if id(value) not in self._borrowed_ids:
            self.borrowed.append(value)
            self._borrowed_ids[id(value)] = len(self.borrowed) - 1
        return self._borrowed_ids[id(value)]

    def lend_value(self, value: Any) -> Any:
        """What the kernel gets for a value of the grader's objects: tensors as copies (with their
        gradient), plain data as it is, every other object borrowed."""
        if isinstance(value, torch.Tensor):
            grad = value.grad if value.is_leaf else None  # a non-leaf has none (reading it warns)
            return {"__gtensor__": value.detach(), "requires_grad": value.requires_grad,
                    "grad": None if grad is None else grad.detach()}
        if isinstance(value, tuple | list):
            return {"__seq__": [self.lend_value(v) for v in value], "tuple": isinstance(value, tuple)}
        if isinstance(value, dict) and all(isinstance(k, str | int) for k in value):  # a state_dict too
            return {"__dict__": {k: self.lend_value(v) for k, v in value.items()}}
        return self.send(value)

    def ok(self, answer: dict, what: str) -> Any:
        """The value of ``answer``, or the student's error as the checks expect it."""
        if "ok" in answer:
            sizes.check_tensors(answer["ok"])  # before any copy of what it holds
            return self.value(answer["ok"], what)
        raise remote_error(answer)
