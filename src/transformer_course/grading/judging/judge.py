"""Test cells judged in the grader's process: the kernel runs the student's code, the grader decides.

A test cell's code (visible or hidden, always the grader's trusted copy) runs here, in the grader,
with the reference importable. Every name the notebook defined is a :class:`Remote` proxy: calling
it, reading an attribute or running ``backward`` sends a request to the student's kernel, where
:mod:`.recorder` carries it out and sends back plain data (a literal, tensors as bytes, else
``torch.load(weights_only=True)``: :func:`.lending.decode`).
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
import queue
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from transformer_course.grading.judging import lending
from transformer_course.grading.kernel import cputime, recorder
from transformer_course.grading.kernel.recorder import ANSWER, PLAIN, PROMPT, encode, pack, plain, unpack

SOURCE = Path(recorder.__file__)  # run in the kernel as text: never imported there
_PLAIN = (*PLAIN, slice, type(Ellipsis))  # what goes to the kernel by value (the rest is borrowed)
_END = object()


class LinkBroken(Exception):
    """The kernel did not answer (it died, or a request ran past its time)."""


class Link:
    """Requests to the recorder in one kernel, through a blocking client of its own.

    Args:
        client: a started ``BlockingKernelClient`` of the student's kernel.
        timeout: seconds one request may run (the student's code inside it included).
        interrupt: called when a request runs past ``timeout`` (interrupts the kernel).
    """

    def __init__(self, client: Any, timeout: float = 60, interrupt: Callable[[], Any] | None = None,
                 alive: Callable[[], bool] | None = None, watched: tuple[str, ...] = ()):
        self.client, self.timeout, self.interrupt, self.alive = client, timeout, interrupt, alive
        self.deadline: float | None = None  # time.monotonic() by which the test cell must end (None: per request)
        # Whether the cell's budget of CPU seconds is spent (the notebook's processes': cputime), asked
        # every cputime.POLL s while the kernel runs; the deadline above is then the clock's outer bound.
        self.spent: Callable[[], bool] | None = None
        self.budget: float | None = None  # that budget, in CPU seconds (for the messages)
        self.over = False  # the budget was spent in this test cell
        self._polled = time.monotonic()
        self.watched = watched
        self._poller = None
        self._serving: str | None = None  # msg_id of the running serve loop
        self._depth = 0  # > 0 while answering a call back: requests then go as its reply
        self.borrowed: list[Any] = []  # the grader's objects passed to the kernel, by number
        self.approved: dict[int, Any] = {}  # callables read through the allow-list (lending.check_attribute)
        self._borrowed_ids: dict[int, int] = {}
        # Attributes of borrowed objects the kernel keeps until this process next runs code of its own
        # (a request, or a call back that changed them): (number, name) -> the value it was.
        self.kept: dict[tuple[int, str], Any] = {}
        self.carried: dict[str, Any] = {}  # names earlier test cells defined
        self.rng: torch.Tensor | None = None  # the kernel's RNG state, as far as this process knows
        self.client.start_channels()
        self._checked = time.monotonic()
        self.name = "_course_judge_" + secrets.token_hex(6)
        self.lent: dict[str, Callable[..., Any]] = {}
        self.calls: dict[int, tuple[list[torch.Tensor], Any]] = {}
        self.modules: list[torch.nn.Module] = []  # instances of lent module classes
        self.proxies: dict[int, Remote] = {}
        self.output: io.StringIO | None = None  # where what the student's code prints goes (the test's output)
        self.attached: list[list] = []  # [tensor, handle, version] of tensors read from the kernel

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.stop_channels()

    def install(self) -> None:
        code = (f"exec(compile({SOURCE.read_text()!r}, '<course judge>', 'exec'), _course_judge := "
                f"{{'__name__': 'course_judge'}})\n"
                f"{self.name} = _course_judge['Recorder'](globals(), {self.watched!r})\ndel _course_judge")
        self._execute(code)

    def attach(self, value: Any) -> Any:
        """Keep the tensors in ``value`` (a module's parameters, read here) tied to their originals:
        if code here changes one in place (``nn.init.eye_(layer.weight)``, ``p.copy_(...)``), the
        original is changed the same way before the kernel runs anything else."""
        # Held (not weakly: `layer.weight.copy_(w)` drops it at once) until released.
        for tensor in lending.tensors(value):
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

    def request(self, ask: dict) -> Any:
        """The recorder's answer to ``ask``: ``{"ok": value}`` or ``{"error": ...}``."""
        self._write_back()
        return self._request(ask)

    def _request(self, ask: dict) -> Any:
        self.kept.clear()  # the kernel forgets them on every request (the test's code may have changed them)
        if self._depth:  # the kernel waits for a call back's reply: the request goes as that reply
            self.client.input(encode({"__request__": encode(ask)}))
            answer = self._await(self._serving, prompt=True)
        else:
            answer = self._serve(ask)
        if not isinstance(answer, dict) or not ({"ok", "error"} & set(answer)):
            raise LinkBroken("the kernel's answer is not one the grader asked for")
        if isinstance(answer.get("printed"), str) and self.output is not None and self.output.tell() < 100_000:
            self.output.write(answer["printed"])
        return answer

    def _serve(self, ask: dict) -> Any:
        if self._serving is None:  # the recorder's serve loop: a cell that runs until finish()
            self._serving = self._send(f"{self.name}.serve()")
            self._await(self._serving, prompt=True)
        self.client.input(encode(ask))
        return self._await(self._serving, prompt=True)

    def finish(self) -> None:
        """End the serve loop (the kernel is free for the notebook's next cell)."""
        serving, self._serving = self._serving, None
        if serving is not None:
            self.client.input("")
            self._await(serving, prompt=False)

    def _execute(self, code: str) -> None:
        self._await(self._send(code), prompt=False)

    def _send(self, code: str) -> str:
        with contextlib.suppress(queue.Empty):
            while True:  # execute replies: not needed (the status and stdin channels say it all)
                self.client.get_shell_msg(timeout=0)
        return self.client.execute(code, silent=True, store_history=False, allow_stdin=True, stop_on_error=False)

    def _await(self, msg_id: str, prompt: bool) -> Any:
        """Wait for the kernel running request ``msg_id``: until it asks for the next request (an
        :data:`ANSWER` prompt, whose answer is returned) if ``prompt``, else until it is idle. Call
        backs (:data:`PROMPT`) are answered on the way. Raises :class:`LinkBroken` when the kernel
        dies, errs outside the student's code, or runs past the timeout (it is interrupted then)."""
        kc = self.client
        deadline = time.monotonic() + self.timeout
        if self.deadline is not None:  # the cell's, which the grader's own work counts against too
            deadline = min(deadline, self.deadline)
        interrupted, started = False, time.monotonic()
        limit = f"{self.timeout:g} s" if self.budget is None else f"{self.timeout:g} s on the clock"
        while True:
            if self.spent is not None and not self.over and time.monotonic() - self._polled > cputime.POLL:
                self._polled = time.monotonic()  # across requests: a test may make many short ones
                self.over = self.spent()
            if self.over and not interrupted:  # interrupted as at the deadline, and every later request of the cell
                # (once it has had POLL s to reach the student's code: not inside the kernel's own messaging)
                deadline, limit = min(deadline, started + cputime.POLL), f"{self.budget:g} s of CPU time"
            if time.monotonic() > deadline:
                if interrupted:
                    self._serving = None
                    raise LinkBroken(f"did not finish within {limit}, and went on after an interrupt")
                interrupted = True
                deadline = time.monotonic() + 10
                if self.interrupt is not None:
                    self.interrupt()
            with contextlib.suppress(queue.Empty):
                msg = kc.stdin_channel.get_msg(timeout=0)
                if msg["header"]["msg_type"] == "input_request":
                    text = str(msg["content"].get("prompt", ""))
                    if not text.startswith(ANSWER):
                        kc.input(self._answer_callback(text))
                    elif interrupted:  # the student's code was stopped; end the loop
                        kc.input("")
                    elif prompt:
                        return self._read_answer(text[len(ANSWER):])
                    else:
                        kc.input("")
                continue
            try:
                self._wait()
                msg = kc.iopub_channel.get_msg(timeout=0)
            except queue.Empty:
                if time.monotonic() - self._checked > 0.5:
                    self._checked = time.monotonic()
                    if not (self.alive() if self.alive is not None else kc.is_alive()):
                        self._serving = None
                        raise LinkBroken("the kernel died") from None
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind == "status" and content.get("execution_state") == "idle":
                if msg_id == self._serving:
                    self._serving = None
                if interrupted:
                    raise LinkBroken(f"did not finish within {limit} and was interrupted (an endless loop?)")
                if prompt:
                    raise LinkBroken("the kernel sent no answer (was the grader's recorder changed?)")
                return None
            if kind == "error" and not prompt:
                self._serving = None
                raise LinkBroken(f"{content.get('ename')}: {content.get('evalue')}")

    def _wait(self) -> bool:
        """Sleep until the kernel sends something on stdin or iopub (at most 50 ms)."""
        if self._poller is None:
            import zmq

            self._poller = zmq.Poller()
            for channel in (self.client.stdin_channel, self.client.iopub_channel):
                self._poller.register(channel.socket, zmq.POLLIN)
        return bool(self._poller.poll(50))

    @staticmethod
    def _read_answer(text: str) -> Any:
        try:
            return lending.decode(text)  # its sizes bounded before it is built
        except lending.Refused:  # the student's value, too large: refused in the test, the kernel goes on
            raise
        except Exception as exc:  # noqa: BLE001 (whatever the kernel sent, it is no answer)
            raise LinkBroken(f"the kernel's answer could not be read as plain data ({type(exc).__name__})") from None

    # Calls back from the kernel: a lent reference function, forward and backward.
    def _answer_callback(self, prompt: str) -> str:
        try:
            if not prompt.startswith(PROMPT):
                raise ValueError("not a call back")
            ask = lending.decode(prompt[len(PROMPT):])
            lending.check_tensors(ask)  # before any copy or computation of the grader's
            self._depth += 1
            try:
                reply = self._call_back(ask)
            finally:
                self._depth -= 1
        except Exception as exc:  # noqa: BLE001 (the kernel's side raises it in the student's code)
            name = "AttributeError" if isinstance(exc, lending.NotLent) else type(exc).__name__
            reply = {"error": f"{name}: {exc}"}
        # The kept attributes this call back's code changed (a model that counts its calls): read again.
        changed = [key for key, value in self.kept.items()
                   if getattr(self.borrowed[key[0]], key[1], _END) is not value]
        for key in changed:
            del self.kept[key]
        if changed:
            reply["forget"] = [list(key) for key in changed]
        return encode(reply)

    def _call_back(self, ask: dict) -> dict:
        if "borrowed" in ask:
            return self._borrowed(ask)
        if "callback" in ask:
            name = str(ask["callback"])
            if name.startswith("#") and _optimizer_of(self.borrowed[int(name[1:])]):
                return self._synced(lambda: self._forward(ask))
            return self._forward(ask)
        if "construct" in ask:
            return self._construct(ask)
        if "module_forward" in ask:
            return self._module_forward(ask)
        return self._vjp(ask)

    def _borrowed(self, ask: dict) -> dict:
        """An attribute, item, length or the items of one of the grader's objects, for the kernel."""
        target = self.borrowed[ask["borrowed"]]
        if "getattr" in ask:
            lending.check_attribute(target, ask["getattr"])  # the allow-list, before anything of target runs
            value = getattr(target, ask["getattr"])
            if callable(value) and not isinstance(value, type | torch.nn.Module):
                self.approved[id(value)] = value  # a method the allow-list lends by name (optimizer.step)
            # A method the object's class defines is the same on every read: the kernel keeps it
            # (a decoding loop's model.decode then costs a request per call, not two).
            stable = (getattr(value, "__self__", None) is target and callable(value)
                      and ask["getattr"] not in getattr(target, "__dict__", {}))
            # A number or a submodule (lent by reference) can be kept until this process runs code that
            # changes it; a tensor or a list goes by value, and is read again every time.
            keep = not stable and not isinstance(value, torch.Tensor | list | tuple | dict | set)
            if keep:
                self.kept[(ask["borrowed"], ask["getattr"])] = value
            return {"value": self.lend_value(value), "stable": stable, "keep": keep}
        elif "setattr" in ask:
            raise lending.Refused(f"your code set `.{ask['setattr']}` on the grader's {type(target).__name__}: "
                                  "the grader's objects are lent read-only")
        elif "list" in ask:
            lending.check_iteration(target)
            value = list(target)
        elif "next" in ask:
            lending.check_iteration(target)
            value = [v for v in [next(target, _END)] if v is not _END]
        elif "len" in ask:
            lending.check_iteration(target)
            value = len(target)
        elif "bool" in ask:
            value = bool(target)  # every object lent is torch's or the course's: no student code runs
        elif "getitem" in ask:
            key = self.value(ask["getitem"])
            lending.check_item(target, key)
            value = target[key]
        else:
            value = type(target).__qualname__
        return {"value": self.lend_value(value)}

    def _synced(self, work: Callable[[], Any]) -> Any:
        """``work()`` (the grader's own code, run for the kernel: an optimizer's step)
        on up-to-date copies of the kernel's tensors this test holds: their gradients are read
        first, and whatever ``work`` changed in them (values, gradients) is written back."""
        if not self.attached:
            return work()
        handles = [h for _, h, _ in self.attached]
        packed = self.ok(self._request({"op": "grads", "handles": handles}), "gradients")
        grads = unpack(packed) if isinstance(packed, dict) and "__packed__" in packed else [None] * len(handles)
        seen = []
        for (tensor, _, _), grad in zip(self.attached, grads, strict=True):
            if grad is not None and (grad.shape != tensor.shape or grad.dtype != tensor.dtype):
                grad = tensor.grad  # the copy is out of date (the kernel's tensor was converted since)
            else:
                tensor.grad = grad
            seen.append((grad, None if grad is None else grad._version))
        result = work()
        changed = {}
        for (tensor, handle, _), (grad, version) in zip(self.attached, seen, strict=True):
            if tensor.grad is not grad or (grad is not None and grad._version != version):
                changed[handle] = None if tensor.grad is None else tensor.grad.detach()
        self._write_back(changed)
        return result

    def _forward(self, ask: dict) -> dict:
        name = str(ask["callback"])
        if name.startswith("#"):
            fn = self.borrowed[int(name[1:])]
            if id(fn) not in self.approved:
                lending.check_callable(fn)
        elif name in self.lent:
            fn = self.lent[name]
        else:
            raise lending.Refused(f"your code called the grader's {name}, which is not lent now")
        inputs: list[torch.Tensor] = []
        leaf = _leaves(inputs)
        args, kwargs = _map(self.value(ask["args"]), leaf), _map(self.value(ask["kwargs"]), leaf)
        lending.check_call_size(name if name in self.lent else type(fn).__name__, args, kwargs, fn)
        with torch.enable_grad():
            result = fn(*args, **kwargs)
        number, outputs = self._remember(inputs, result)
        return {"call": number, "tuple": isinstance(result, tuple),
                "differentiable": [isinstance(o, torch.Tensor) and o.requires_grad for o in outputs],
                "outputs": [o.detach() if isinstance(o, torch.Tensor) else self.lend_value(o) for o in outputs]}

    def _construct(self, ask: dict) -> dict:
        """A lent module class instantiated here, with the kernel's RNG (its initial values are
        those an instance made there would get); its parameters and buffers go to the kernel."""
        name = str(ask["construct"])
        if name not in self.lent:
            raise lending.Refused(f"your code built the grader's {name}, which is not lent now")
        cls = self.lent[name]
        args, kwargs = self.value(ask["args"]), self.value(ask["kwargs"])
        lending.check_call_size(name, args, kwargs, cls)
        with torch.random.fork_rng(devices=[]):  # the kernel's RNG state, for this call only
            torch.random.set_rng_state(_rng_state(ask["rng"]))
            module = cls(*args, **kwargs)
            rng = torch.random.get_rng_state()
        self.modules.append(module)
        return {"module": len(self.modules) - 1, "rng": rng,
                "params": [[n, p.detach()] for n, p in module.named_parameters()],
                "buffers": [[n, b.detach()] for n, b in module.named_buffers()]}

    def _module_forward(self, ask: dict) -> dict:
        """A lent module's forward pass here, on the parameters and buffers its stand-in holds there."""
        module = self.modules[ask["module_forward"]]
        module.train(bool(ask["training"]))
        inputs: list[torch.Tensor] = []
        leaf = _leaves(inputs)
        args, kwargs = _map(self.value(ask["args"]), leaf), _map(self.value(ask["kwargs"]), leaf)
        params = {n: leaf(t) for n, t in ask["params"]}
        with torch.random.fork_rng(devices=[]), torch.enable_grad():  # the kernel's RNG state, for this call only
            torch.random.set_rng_state(_rng_state(ask["rng"]))
            result = torch.func.functional_call(module, {**params, **ask["buffers"]}, tuple(args), kwargs)
            rng = torch.random.get_rng_state()
        number, outputs = self._remember(inputs, result)
        return {"call": number, "tuple": isinstance(result, tuple), "rng": rng,
                "outputs": [o.detach() if isinstance(o, torch.Tensor) else o for o in outputs]}

    def _remember(self, inputs: list[torch.Tensor], result: Any) -> tuple[int, list]:
        """Keep a call's leaf inputs and outputs for its vector-Jacobian products (:meth:`_vjp`)."""
        outputs = list(result) if isinstance(result, tuple) else [result]
        number = len(self.calls) + 1
        self.calls[number] = (inputs, outputs)
        return number, outputs

    def _vjp(self, ask: dict) -> dict:
        inputs, outputs = self.calls[ask["vjp"]]
        pairs = [(o, g) for o, g in zip(outputs, ask["grads"], strict=False)
                 if isinstance(o, torch.Tensor) and o.requires_grad and g is not None]
        # backward(), not grad(): a borrowed module's own parameters get their .grad here, as they
        # would in a training step (the inputs' gradients are read off and cleared).
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs], retain_graph=True)
        found = [i.grad if i.requires_grad else None for i in inputs]
        for i in inputs:
            i.grad = None
        return {"grads": found}

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
            lending.check_tensors(answer["ok"])  # before any copy of what it holds
            return self.value(answer["ok"], what)
        raise remote_error(answer)


class _Through(torch.autograd.Function):
    """Joins a call's outputs here to its inputs here: backward asks the kernel to run backward
    through the call's own graph there (its parameters' gradients accumulate there) and returns the
    gradients its copies of the inputs got."""

    @staticmethod
    def forward(ctx: Any, link: Link, call: int, count: int, _anchor: torch.Tensor, *tensors: torch.Tensor) -> Any:
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


def _through(link: Link, call: int, value: Any, leaves: list[torch.Tensor]) -> Any:
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


def _rng_state(value: Any) -> torch.Tensor:
    """An RNG state from the kernel, as torch's CPU generator takes it (else the grader's own is refused)."""
    if not (isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 1
            and value.numel() == torch.random.get_rng_state().numel()):
        raise lending.Refused("your code sent the grader an RNG state that is not one")
    return value.detach().clone()


def _optimizer_of(fn: Any) -> bool:
    """Whether ``fn`` is an optimizer's method (``step``, ``zero_grad``): the only calls of the
    grader's objects that read and change the gradients of the kernel's tensors (see ``_synced``)."""
    return isinstance(getattr(fn, "__self__", fn), torch.optim.Optimizer)


def _default_device() -> torch.device:
    """The device tensors made without ``device=`` go to here (a ``with torch.device(...)`` block)."""
    getter = getattr(torch, "get_default_device", None)  # torch >= 2.3
    return getter() if getter is not None else torch.empty(0).device


def _leaves(inputs: list[torch.Tensor]) -> Callable[[Any], Any]:
    """A function that turns each tensor it gets into a fresh leaf (requiring grad when floating)
    and appends it to ``inputs``, where :meth:`_vjp` reads its gradient."""

    def leaf(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            v = v.detach().requires_grad_(v.is_floating_point())
            inputs.append(v)
        return v

    return leaf


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

    def __init__(self, link: Link, handle: int, label: str, type_name: str = ""):
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
                from transformer_course.grading.kernel.recorder import _resolve

                found = _resolve(name)
                if isinstance(found, type):
                    return found
        return Remote

    def _course_is(self, cls: type) -> bool:
        """``isinstance(the remote object, cls)``, asked in the kernel."""
        link = object.__getattribute__(self, "_link")
        return link.ok(link.request({"op": "isinstance", "h": object.__getattribute__(self, "_handle"),
                                     "cls": f"{cls.__module__}.{cls.__qualname__}"}), "isinstance") is True


def _called(link: Link, called: Any, rng: torch.Tensor, watch: dict[str, str], leaves: list[torch.Tensor]) -> Any:
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


def watching() -> dict[str, str]:
    """The built-ins watched by the checks' ``forbid`` right now, by dotted path: their labels."""
    checks = sys.modules.get("course_reference.checks")
    return dict(checks.watched()) if checks is not None and hasattr(checks, "watched") else {}


def report_used(labels: list[str]) -> None:
    checks = sys.modules.get("course_reference.checks")
    if checks is not None and labels:
        checks.note_used(labels)


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
