"""The kernel's call backs to the judge: one handler for each kind of message.

While a request runs in the student's kernel, the student's code may use what the grader lends it:
a reference function (``callback``), a reference module class (``construct``, then
``module_forward``), a gradient through either (``vjp``), or one of the grader's objects
(``borrowed``: an attribute, an item, its length, its items, ...). The recorder sends each as a
dict whose first key names its kind; :func:`handle` finds its handler in :data:`CALL_BACKS` (and a
borrowed object's in :data:`BORROWED`), which answers with the reply's dict. Whatever a handler
raises goes back as the student's error (:meth:`.link.Link._answer_callback`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from transformer_course.grading.judging import lending, sizes
from transformer_course.grading.judging.remote import _map
from transformer_course.grading.kernel.wire import unpack

END = object()  # no more items (a borrowed iterator's next), or no such attribute


def handle(link: Any, ask: Any) -> dict:
    """The reply to call back ``ask`` of the kernel behind ``link`` (a :class:`~.link.Link`)."""
    # A message of no kind named here is read as a vjp that lacks its call, as it always was
    # (refused in the student's code as "KeyError: 'vjp'").
    kind = next((k for k in CALL_BACKS if k in ask), "vjp")
    return CALL_BACKS[kind](link, ask)


def _callback(link: Any, ask: dict) -> dict:
    """A lent function (by name) or a borrowed object's method (``#number``) called for the kernel."""
    name = str(ask["callback"])
    if name.startswith("#") and _optimizer_of(link.borrowed[int(name[1:])]):
        return _synced(link, lambda: _forward(link, ask))
    return _forward(link, ask)


def _borrowed(link: Any, ask: dict) -> dict:
    """An attribute, item, length or the items of one of the grader's objects, for the kernel."""
    target = link.borrowed[ask["borrowed"]]
    kind = next((k for k in BORROWED if k in ask), "type")  # as before: else its type's name
    return BORROWED[kind](link, ask, target)


def _getattr(link: Any, ask: dict, target: Any) -> dict:
    lending.check_attribute(target, ask["getattr"])  # the allow-list, before anything of target runs
    value = getattr(target, ask["getattr"])
    if callable(value) and not isinstance(value, type | torch.nn.Module):
        link.approved[id(value)] = value  # a method the allow-list lends by name (optimizer.step)
    # A method the object's class defines is the same on every read: the kernel keeps it
    # (a decoding loop's model.decode then costs a request per call, not two).
    stable = (getattr(value, "__self__", None) is target and callable(value)
              and ask["getattr"] not in getattr(target, "__dict__", {}))
    # A number or a submodule (lent by reference) can be kept until this process runs code that
    # changes it; a tensor or a list goes by value, and is read again every time.
    keep = not stable and not isinstance(value, torch.Tensor | list | tuple | dict | set)
    if keep:
        link.kept[(ask["borrowed"], ask["getattr"])] = value
    return {"value": link.lend_value(value), "stable": stable, "keep": keep}


def _setattr(link: Any, ask: dict, target: Any) -> dict:
    raise lending.Refused(f"your code set `.{ask['setattr']}` on the grader's {type(target).__name__}: "
                          "the grader's objects are lent read-only")


def _list(link: Any, ask: dict, target: Any) -> dict:
    lending.check_iteration(target)
    return {"value": link.lend_value(list(target))}


def _next(link: Any, ask: dict, target: Any) -> dict:
    lending.check_iteration(target)
    return {"value": link.lend_value([v for v in [next(target, END)] if v is not END])}


def _len(link: Any, ask: dict, target: Any) -> dict:
    lending.check_iteration(target)
    return {"value": link.lend_value(len(target))}


def _bool(link: Any, ask: dict, target: Any) -> dict:
    # every object lent is torch's or the course's: no student code runs
    return {"value": link.lend_value(bool(target))}


def _getitem(link: Any, ask: dict, target: Any) -> dict:
    key = link.value(ask["getitem"])
    lending.check_item(target, key)
    return {"value": link.lend_value(target[key])}


def _type(link: Any, ask: dict, target: Any) -> dict:
    return {"value": link.lend_value(type(target).__qualname__)}


def _synced(link: Any, work: Callable[[], Any]) -> Any:
    """``work()`` (the grader's own code, run for the kernel: an optimizer's step)
    on up-to-date copies of the kernel's tensors this test holds: their gradients are read
    first, and whatever ``work`` changed in them (values, gradients) is written back."""
    if not link.attached:
        return work()
    handles = [h for _, h, _ in link.attached]
    packed = link.ok(link._request({"op": "grads", "handles": handles}), "gradients")
    grads = unpack(packed) if isinstance(packed, dict) and "__packed__" in packed else [None] * len(handles)
    seen = []
    for (tensor, _, _), grad in zip(link.attached, grads, strict=True):
        if grad is not None and (grad.shape != tensor.shape or grad.dtype != tensor.dtype):
            grad = tensor.grad  # the copy is out of date (the kernel's tensor was converted since)
        else:
            tensor.grad = grad
        seen.append((grad, None if grad is None else grad._version))
    result = work()
    changed = {}
    for (tensor, handle, _), (grad, version) in zip(link.attached, seen, strict=True):
        if tensor.grad is not grad or (grad is not None and grad._version != version):
            changed[handle] = None if tensor.grad is None else tensor.grad.detach()
    link._write_back(changed)
    return result


def _forward(link: Any, ask: dict) -> dict:
    name = str(ask["callback"])
    if name.startswith("#"):
        fn = link.borrowed[int(name[1:])]
        if id(fn) not in link.approved:
            lending.check_callable(fn)
    elif name in link.lent:
        fn = link.lent[name]
    else:
        raise lending.Refused(f"your code called the grader's {name}, which is not lent now")
    inputs: list[torch.Tensor] = []
    leaf = _leaves(inputs)
    args, kwargs = _map(link.value(ask["args"]), leaf), _map(link.value(ask["kwargs"]), leaf)
    sizes.check_call_size(name if name in link.lent else type(fn).__name__, args, kwargs, fn)
    with torch.enable_grad():
        result = fn(*args, **kwargs)
    number, outputs = _remember(link, inputs, result)
    return {"call": number, "tuple": isinstance(result, tuple),
            "differentiable": [isinstance(o, torch.Tensor) and o.requires_grad for o in outputs],
            "outputs": [o.detach() if isinstance(o, torch.Tensor) else link.lend_value(o) for o in outputs]}


def _construct(link: Any, ask: dict) -> dict:
    """A lent module class instantiated here, with the kernel's RNG (its initial values are
    those an instance made there would get); its parameters and buffers go to the kernel."""
    name = str(ask["construct"])
    if name not in link.lent:
        raise lending.Refused(f"your code built the grader's {name}, which is not lent now")
    cls = link.lent[name]
    args, kwargs = link.value(ask["args"]), link.value(ask["kwargs"])
    sizes.check_call_size(name, args, kwargs, cls)
    with torch.random.fork_rng(devices=[]):  # the kernel's RNG state, for this call only
        torch.random.set_rng_state(_rng_state(ask["rng"]))
        module = cls(*args, **kwargs)
        rng = torch.random.get_rng_state()
    link.modules.append(module)
    return {"module": len(link.modules) - 1, "rng": rng,
            "params": [[n, p.detach()] for n, p in module.named_parameters()],
            "buffers": [[n, b.detach()] for n, b in module.named_buffers()]}


def _module_forward(link: Any, ask: dict) -> dict:
    """A lent module's forward pass here, on the parameters and buffers its stand-in holds there."""
    module = link.modules[ask["module_forward"]]
    module.train(bool(ask["training"]))
    inputs: list[torch.Tensor] = []
    leaf = _leaves(inputs)
    args, kwargs = _map(link.value(ask["args"]), leaf), _map(link.value(ask["kwargs"]), leaf)
    params = {n: leaf(t) for n, t in ask["params"]}
    with torch.random.fork_rng(devices=[]), torch.enable_grad():  # the kernel's RNG state, for this call only
        torch.random.set_rng_state(_rng_state(ask["rng"]))
        result = torch.func.functional_call(module, {**params, **ask["buffers"]}, tuple(args), kwargs)
        rng = torch.random.get_rng_state()
    number, outputs = _remember(link, inputs, result)
    return {"call": number, "tuple": isinstance(result, tuple), "rng": rng,
            "outputs": [o.detach() if isinstance(o, torch.Tensor) else o for o in outputs]}


def _remember(link: Any, inputs: list[torch.Tensor], result: Any) -> tuple[int, list]:
    """Keep a call's leaf inputs and outputs for its vector-Jacobian products (:func:`_vjp`)."""
    outputs = list(result) if isinstance(result, tuple) else [result]
    number = len(link.calls) + 1
    link.calls[number] = (inputs, outputs)
    return number, outputs


def _vjp(link: Any, ask: dict) -> dict:
    inputs, outputs = link.calls[ask["vjp"]]
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


def _leaves(inputs: list[torch.Tensor]) -> Callable[[Any], Any]:
    """A function that turns each tensor it gets into a fresh leaf (requiring grad when floating)
    and appends it to ``inputs``, where :func:`_vjp` reads its gradient."""

    def leaf(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            v = v.detach().requires_grad_(v.is_floating_point())
            inputs.append(v)
        return v

    return leaf


# Each kind of call back, in the order the kind is looked for among a message's keys.


CALL_BACKS: dict[str, Callable[[Any, Any], dict]] = {
    "borrowed": _borrowed, "callback": _callback, "construct": _construct, "module_forward": _module_forward,
    "vjp": _vjp,
}


# What the kernel asks of one of the grader's objects (a call of one is a "callback" of "#number").


BORROWED: dict[str, Callable[[Any, dict, Any], dict]] = {
    "getattr": _getattr, "setattr": _setattr, "list": _list, "next": _next, "len": _len, "bool": _bool,
    "getitem": _getitem, "type": _type,
}
