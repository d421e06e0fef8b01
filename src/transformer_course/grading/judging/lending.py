"""What the student's kernel may ask of the grader's objects: an allow-list, decided here.

A test can hand the grader's own objects to the student's code (07's ``train_epoch`` gets a model,
an optimizer, a scheduler and a loss; ``greedy_decode`` and ``generate`` get a model). The kernel
then works on them through requests (:mod:`.judge`). Those requests come from code the student
controls, so what they may reach is decided on the grader's side, by the kind of object, never by
reflection:

- a module (``nn.Module``): calling it (its forward pass); its parameters, buffers and submodules;
  plain attributes of its own (numbers, strings, booleans, devices, dtypes: ``pad_id``); the
  methods of :data:`MODULE_METHODS`; and public methods of the course's own classes (``encode``,
  ``decode`` of the reference ``Transformer``);
- an optimizer: ``step``, ``zero_grad``, ``param_groups`` (copied);
- a learning-rate scheduler: ``step``, ``get_last_lr``, ``last_epoch``, ``base_lrs``, ``optimizer``;
- an iterator over tensors or modules (``model.parameters()``): iterating it.

Never a name that starts with ``_`` (dunders included), never a function, class, module or dict
of code lent back, never an attribute written. Anything else raises :class:`Refused`, whose message
says what the student's code asked for and that the grader does not lend it.

Sizes are bounded too, before the grader copies or computes anything: each message the kernel sends
(:mod:`.decoding`), the tensors in it and each call of a lent reference (:mod:`.sizes`).
"""

from __future__ import annotations

import inspect
import types
from pathlib import Path
from typing import Any

import torch

# Methods of torch.nn.Module a student's code may call on the grader's module.
MODULE_METHODS = frozenset({
    "forward", "train", "eval", "parameters", "named_parameters", "buffers", "named_buffers", "children",
    "named_children", "modules", "named_modules", "zero_grad", "state_dict", "to", "cpu", "float", "double",
    "requires_grad_",
})
OPTIMIZER_NAMES = frozenset({"step", "zero_grad", "param_groups"})
SCHEDULER_NAMES = frozenset({"step", "get_last_lr", "last_epoch", "base_lrs", "optimizer"})
# Plain values a module's own attribute may hold and go to the kernel as they are.
PLAIN_ATTRIBUTES = (type(None), bool, int, float, str, torch.device, torch.dtype)
# The course's own classes: their public methods are the notebooks' documented API.
COURSE_MODULES = ("course_reference",)
TEST_CODE = "<test cell"  # the file name test cells are compiled under (judge.run_test)
_TORCH_DIR = str(Path(torch.__file__).parent)  # generators of torch's own code (model.parameters())
CONTAINERS = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict, torch.nn.ParameterList)


class Refused(Exception):
    """The kernel asked for something the grader does not lend (the student's code sees this error)."""


class NotLent(AttributeError):
    """An attribute the grader does not lend: an ``AttributeError`` in the student's code, so that
    ``hasattr(model, name)`` and ``getattr(model, name, default)`` work as they do on any object."""


def _course_class(cls: type) -> bool:
    return any(k.__module__.split(".")[0] in COURSE_MODULES for k in cls.__mro__ if k is not object)


def _test_function(value: Any) -> bool:
    """A function the test cell itself defined (the grader's trusted test code)."""
    return inspect.isfunction(value) and value.__code__.co_filename.startswith(TEST_CODE)


def _kind(target: Any) -> str:
    return f"{'module' if isinstance(target, torch.nn.Module) else 'object'} {type(target).__name__}"


def check_attribute(target: Any, name: str) -> None:
    """Refuse ``target.name`` unless the allow-list lends it (nothing of ``target`` runs before this).

    Raises:
        NotLent: an AttributeError saying what was asked for and that the grader does not lend it.
    """
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise NotLent(f"your code asked the grader's {_kind(target)} for {name!r}: the grader lends no private "
                      "or special attribute")
    if isinstance(target, torch.nn.Module):
        own = vars(target)
        if name in own.get("_parameters", {}) or name in own.get("_buffers", {}) or name in own.get("_modules", {}):
            return
        if isinstance(inspect.getattr_static(target, name, None), PLAIN_ATTRIBUTES) and (
                name in own or any(name in vars(k) for k in type(target).__mro__)):
            return  # a number or a name of its own or of its class (read without running anything)
        if name in MODULE_METHODS:
            return
        found = inspect.getattr_static(type(target), name, None)
        owner = next((k for k in type(target).__mro__ if name in vars(k)), None)
        if found is not None and owner is not None and (
                (_course_class(owner) and (inspect.isfunction(found) or isinstance(found, property)))
                or _test_function(found)):
            return
    elif isinstance(target, torch.optim.Optimizer):
        if name in OPTIMIZER_NAMES:
            return
    elif isinstance(target, torch.optim.lr_scheduler.LRScheduler):
        if name in SCHEDULER_NAMES:
            return
    raise NotLent(f"your code asked the grader's {_kind(target)} for `.{name}`, which the grader does not lend "
                  "(it lends a model's forward pass, parameters, buffers, submodules and documented attributes, "
                  "an optimizer's step and zero_grad, a scheduler's step)")


def lendable(value: Any) -> bool:
    """Whether ``value`` (an object of the grader's, not plain data) may be lent to the kernel by reference."""
    if isinstance(value, torch.nn.Module | torch.optim.Optimizer | torch.optim.lr_scheduler.LRScheduler):
        return True
    if _test_function(value):  # a loss or a callback the test defines: calling it runs the test's code
        return True
    if isinstance(value, types.GeneratorType):  # model.parameters(), named_modules(), ...
        return value.gi_code.co_filename.startswith(_TORCH_DIR)
    if inspect.ismethod(value):  # a bound method, allowed by name on an object that may be lent
        owner = value.__self__
        try:
            check_attribute(owner, value.__name__)
        except NotLent:
            return False
        return lendable(owner)
    return False


def check_lend(value: Any) -> None:
    """Refuse to lend ``value`` unless :func:`lendable`."""
    if not lendable(value):
        what = "a function" if callable(value) and not isinstance(value, type) else (
            "a class" if isinstance(value, type) else f"a {type(value).__name__}")
        raise Refused(f"your code asked the grader for {what}, which the grader does not lend")


def check_item(target: Any, key: Any) -> None:
    """``target[key]``: only a container module's items, by number, slice or name."""
    if isinstance(target, CONTAINERS) and isinstance(key, int | slice | str):
        return
    raise Refused(f"your code indexed the grader's {_kind(target)}, which the grader does not lend by item")


def check_iteration(target: Any) -> None:
    """``list(target)``, ``next(target)``, ``len(target)``: containers and iterators of torch."""
    if isinstance(target, CONTAINERS) or (isinstance(target, types.GeneratorType) and lendable(target)):
        return
    raise Refused(f"your code iterated over the grader's {_kind(target)}, which the grader does not lend")


def check_callable(target: Any) -> None:
    """Calling ``target``: a module (its forward pass) or a method the allow-list lends."""
    if isinstance(target, torch.nn.Module) or _test_function(target) or (inspect.ismethod(target) and lendable(target)):
        return
    raise Refused(f"your code called the grader's {_kind(target)}, which the grader does not lend")
