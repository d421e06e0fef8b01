"""How large a value from the kernel, or a call it asks for, may be: bounded before the grader works on it.

The grader copies what the kernel sends and computes calls of lent references (:mod:`.lending`) in its
own memory, on its own clock, for code the student controls. So every tensor in a message from the
kernel is counted before any copy (:func:`check_tensors`: a tensor expanded with stride 0 is small to
send and large once copied), and every call of a lent reference before it runs
(:func:`check_call_size`): its size counts every argument that stands for one: ints, anything
``operator.index`` takes, one-element tensors, floats where the reference does not take a float.
Anything larger than any test's raises :class:`~.lending.Refused`, saying by how much.
"""

from __future__ import annotations

import inspect
import math
import operator
from typing import Any

import torch

from transformer_course.grading.judging.lending import Refused

# The most elements one tensor from the kernel may have, and all of them in one message together
# (the tests' inputs are a few thousand elements; 2**22 float32 is 16 MiB).
MAX_TENSOR_ELEMENTS = 2**22
MAX_MESSAGE_ELEMENTS = 2**24
# The most work one call of a lent reference may ask for: the product of its size arguments (their
# defaults included), times its largest tensor's elements (PositionalEncoding's default 5000 x 512
# is 2.6 million).
MAX_CALL_SIZE = 2**24


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value``, in lists, tuples and dicts' values (:class:`Refused` past 32 levels)."""
    found: list[torch.Tensor] = []

    def walk(item: Any, depth: int) -> None:
        if depth > 32:
            raise Refused("the values your code sent are nested too deeply")
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, list | tuple | dict):
            for inner in item.values() if isinstance(item, dict) else item:
                walk(inner, depth + 1)

    walk(value, 0)
    return found


def check_tensors(value: Any) -> None:
    """Refuse a message from the kernel whose tensors are larger than any test's (before any copy:
    a tensor expanded with stride 0 is small to send and large once copied)."""
    found = tensors(value)
    total = 0
    for tensor in found:
        count = tensor.numel()
        if count > MAX_TENSOR_ELEMENTS:
            raise Refused(f"your code sent the grader a tensor of shape {tuple(tensor.shape)} ({count:,} elements; "
                          f"at most {MAX_TENSOR_ELEMENTS:,}): larger than any test's")
        total += count
    if total > MAX_MESSAGE_ELEMENTS:
        raise Refused(f"your code sent the grader {total:,} tensor elements at once (at most {MAX_MESSAGE_ELEMENTS:,})")


def check_call_size(name: str, args: Any, kwargs: Any, fn: Any = None) -> None:
    """Refuse a call of a lent reference (``fn``, called as ``name``) larger than :data:`MAX_CALL_SIZE`:
    the grader computes it in its own memory.

    Its size is the product of its size arguments, their defaults included, times the elements of
    its largest tensor (``repeat_kv(x, n)`` makes ``n`` times ``x``). A size argument is any
    argument :func:`size_of` reads a size from (an int, a numpy integer, a one-element tensor, a
    float where ``fn`` does not take a float), except a parameter ``fn`` declares as a tensor or a
    float (``rotary_angles``' ``base``).

    Raises:
        Refused: the call is larger, saying its sizes and the bound.
    """
    found = tensors([args, kwargs])
    sizes = [n for value, annotation in _arguments(fn, args, kwargs) if (n := size_of(value, annotation)) > 1]
    largest = max((t.numel() for t in found), default=1)
    work = max(sum(t.numel() for t in found), _product([*sizes, largest]))
    if work > MAX_CALL_SIZE:
        shown = sizes + [tuple(t.shape) for t in found if t.numel() > 1]
        raise Refused(f"your code called the grader's {name} on sizes {shown} "
                      f"({work:,} elements; at most {MAX_CALL_SIZE:,})")


def size_of(value: Any, annotation: str = "") -> int:
    """The size ``value``, an argument of a lent reference, stands for (0 where none).

    An int or anything ``operator.index`` takes (a numpy integer, a one-element integer tensor) is
    its absolute value; a float or a one-element floating tensor is its absolute value rounded up
    (``torch.arange(1e9)`` takes one); a boolean, a larger tensor (counted by its elements) or
    anything else is 0. So is any value of a parameter whose ``annotation`` says float (a base, a
    temperature) or tensor (its values are data)."""
    if isinstance(value, bool) or "Tensor" in annotation or ("float" in annotation and "int" not in annotation):
        return 0  # a flag, a tensor's data, a float parameter (a base, a temperature): no size
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.dtype == torch.bool or value.is_complex():
            return 0
        try:
            value = value.item()
        except Exception:  # noqa: BLE001 (a meta tensor has no value: it cannot be a size either)
            return 0
    try:
        return abs(operator.index(value))
    except TypeError:
        pass
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        return MAX_CALL_SIZE + 1 if math.isinf(value) else math.ceil(abs(value))
    return 0


def _arguments(fn: Any, args: Any, kwargs: Any) -> list[tuple[Any, str]]:
    """``(value, its parameter's annotation)`` for each argument of a call of ``fn`` and each
    default it leaves (annotation '' where unknown: then every value counts)."""
    args = list(args) if isinstance(args, list | tuple) else [args]
    kwargs = kwargs if isinstance(kwargs, dict) else {}
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):  # no signature, or a call that fails anyway: count every value
        return [(v, "") for v in [*args, *kwargs.values()]]
    bound.apply_defaults()
    found = []
    for param_name, value in bound.arguments.items():
        param = bound.signature.parameters[param_name]
        annotation = "" if param.annotation is inspect.Parameter.empty else str(param.annotation)
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            found += [(v, annotation) for v in value]
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            found += [(v, annotation) for v in value.values()]
        else:
            found.append((value, annotation))
    return found


def _product(values: list[int]) -> int:
    result = 1
    for v in values:
        result *= v
        if result > MAX_CALL_SIZE:
            break
    return result
