"""The grading kernel's half of the judge (:mod:`.judge`): it calls the student's code and reports
what comes back. It holds no reference, no expected value and no verdict.

The grader executes its source in the student's kernel (it is never imported there) and then
sends one request per operation (:mod:`.operations`): look up a name the notebook defined, read or
set an attribute, call a function or a module, run ``backward``, copy parameters in. Arguments and
results travel as text (:mod:`.wire`). Tensors, numbers, strings, dtypes and containers of them go
by value; every other object (a function, a module, a class) by a numbered handle the grader can
name in later requests. What the grader lends for the length of a test asks the grader back
(:mod:`.lent`).

The kernel runs the texts of :data:`.link.SOURCES` in their order in one namespace (the sandbox
hides this repository: nothing here can be imported there); the grader imports them as modules.

Everything here runs in a process the student controls: it can be changed, and then the student's
code simply seems to return something else. The verdict is the grader's, from those results.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import torch

if __name__ != "course_judge":  # imported by the grader; in the kernel, the texts before this one ran in this namespace
    from transformer_course.grading.kernel.lent import Borrowed, Lending
    from transformer_course.grading.kernel.operations import Operations, _error, _resolve
    from transformer_course.grading.kernel.wire import ANSWER, MAX_ANSWER_CHARS, PLAIN, decode, encode, pack


class Recorder(Operations, Lending):
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
