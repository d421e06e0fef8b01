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

Sizes are bounded too, before the grader copies or computes anything: every message the kernel
sends, its plain data (lists, dicts, strings, numbers) before it is built (:func:`decode`), every
tensor in it (:func:`check_tensors`), and every call of a lent reference, whose size counts every
argument that stands for one: ints, anything ``operator.index`` takes, one-element tensors, floats
where the reference does not take a float (:func:`check_call_size`).
"""

from __future__ import annotations

import base64
import inspect
import io
import math
import operator
import pickletools
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

import torch

from transformer_course.grading.kernel import wire
from transformer_course.grading.kernel.wire import MAX_ANSWER_CHARS

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

# The most elements one tensor from the kernel may have, and all of them in one message together
# (the tests' inputs are a few thousand elements; 2**22 float32 is 16 MiB).
MAX_TENSOR_ELEMENTS = 2**22
MAX_MESSAGE_ELEMENTS = 2**24
# The most work one call of a lent reference may ask for: the product of its size arguments (their
# defaults included), times its largest tensor's elements (PositionalEncoding's default 5000 x 512
# is 2.6 million).
MAX_CALL_SIZE = 2**24
# Plain data (lists, tuples, dicts, strings, bytes, numbers) has the tensors' bounds: one list,
# dict, string or bytes at most MAX_TENSOR_ELEMENTS items or characters, a message's elements
# (tensors' and plain data's together) at most MAX_MESSAGE_ELEMENTS. Before any of it is built:
# the message at most MAX_MESSAGE_CHARS (what the recorder itself sends at most), its pickled
# plain data at most MAX_PLAIN_BYTES (the bytes of a largest float32 tensor), and what that would
# take once built, estimated from the pickle, at most MAX_PLAIN_MEMORY (a float in a list takes 32
# bytes where a tensor's takes 4).
MAX_MESSAGE_CHARS = MAX_ANSWER_CHARS
MAX_PLAIN_BYTES = 2**24
MAX_PLAIN_MEMORY = 2**26
# Levels of a whole message (a value's own nesting, at most 32 in :func:`tensors`, is about twice
# that on the wire: each list travels inside a dict that says it is one).
MAX_DEPTH = 80
# What one pickle opcode builds, in bytes (an estimate on the safe side; at least a reference and
# a slot in the unpickler's stack or memo for every other opcode).
_OPCODE_BYTES = {
    **dict.fromkeys(("EMPTY_LIST", "LIST", "EMPTY_DICT", "DICT", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2",
                     "TUPLE3", "EMPTY_SET", "FROZENSET", "MARK", "REDUCE", "NEWOBJ", "NEWOBJ_EX", "BUILD",
                     "GLOBAL", "STACK_GLOBAL", "BINPERSID", "PERSID"), 72),
    **dict.fromkeys(("BINPUT", "LONG_BINPUT", "PUT", "MEMOIZE"), 64),
    **dict.fromkeys(("BININT", "BININT1", "BININT2", "INT", "LONG", "LONG1", "LONG4", "BINFLOAT", "FLOAT"), 40),
}
_SMALL_PICKLE = 2**16  # bytes: a pickle this small cannot build more than a few MiB


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


def decode(text: str) -> Any:
    """A message from the kernel (``wire.encode``'s text), read back with its sizes bounded
    before anything of it is built: the text's length, the archive (``torch.save``'s own: records
    stored, not compressed, none repeated), the bytes of its pickled plain data and what they would
    build (:data:`MAX_PLAIN_BYTES`, :data:`MAX_PLAIN_MEMORY`); then, read with
    ``torch.load(weights_only=True)``, the elements of each list, dict and string in it and of the
    whole message (:func:`check_message`). A message of plain values written as a literal
    (:func:`.wire.literal`: at most :data:`~.wire.MAX_LITERAL` characters) is read with
    ``ast.literal_eval`` and checked the same way, and so is one of plain values and dense tensors
    (:func:`.wire.raw`: each tensor built from its dtype, its shape and its share of the bytes).

    Raises:
        Refused: a message over a bound, saying which (the student's code sent it).
        ValueError: a message that is not one (not base64, not an archive ``torch.save`` writes).
    """
    if not isinstance(text, str):
        raise ValueError("a message that is not text")
    if len(text) > MAX_MESSAGE_CHARS:
        raise Refused(f"your code sent the grader {len(text) / 1e6:,.0f} MB at once "
                      f"(at most {MAX_MESSAGE_CHARS / 1e6:,.0f} MB): larger than any test's")
    if text.startswith(wire.LITERAL):  # plain values only, read without building anything else
        value = wire.literal(text)
        check_message(value)
        return value
    if text.startswith(wire.TENSORS):  # plain values and tensors of bytes as many as the text's
        value = wire.raw(text)
        check_message(value)
        return value
    raw = base64.b64decode(text, validate=True)
    pickles = _archive_pickles(raw)
    for pickled in pickles:
        check_pickle(pickled)
    value = torch.load(io.BytesIO(raw), weights_only=True)
    check_message(value)
    return value


def _archive_pickles(raw: bytes) -> list[bytes]:
    """The pickles in ``raw``, an archive as ``torch.save`` writes it (else ValueError): every record
    stored as it is (a compressed one could unpack to any size), none twice (which of the two would
    torch read?), their sizes within the message's."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
        records = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise ValueError(f"not an archive torch.save writes ({exc})") from None
    names = [r.filename for r in records]
    if len(set(names)) != len(names) or any(
            r.compress_type != zipfile.ZIP_STORED or r.file_size != r.compress_size for r in records) \
            or sum(r.file_size for r in records) > len(raw):
        raise ValueError("not an archive torch.save writes (a record compressed, repeated or larger than it)")
    pickles = [r for r in records if r.filename.endswith(".pkl")]
    if not pickles:
        raise ValueError("not an archive torch.save writes (no pickle)")
    for record in pickles:
        if record.file_size > MAX_PLAIN_BYTES:
            raise Refused(f"your code sent the grader {record.file_size:,} bytes of plain data (lists, dicts, "
                          f"strings, numbers) at once (at most {MAX_PLAIN_BYTES:,}; a tensor holds numbers "
                          "in far less): larger than any test's")
    return [archive.read(record) for record in pickles]


def check_pickle(pickled: bytes) -> None:
    """Refuse a pickle (of at most :data:`MAX_PLAIN_BYTES`) that would build more than
    :data:`MAX_PLAIN_MEMORY` bytes of objects, or a string or bytes of more than
    :data:`MAX_TENSOR_ELEMENTS` characters, by reading its opcodes (nothing is built; it stops at
    the first bound passed). A short pickle cannot, and is not read.

    Raises:
        Refused: the plain data is too large, saying how.
        ValueError: not a pickle.
    """
    if len(pickled) <= _SMALL_PICKLE:
        return
    memory = 0
    try:
        for opcode, arg, _ in pickletools.genops(pickled):
            memory += _OPCODE_BYTES.get(opcode.name, 16)
            if isinstance(arg, str | bytes | bytearray):
                if len(arg) > MAX_TENSOR_ELEMENTS:
                    raise Refused(f"your code sent the grader a {type(arg).__name__} of {len(arg):,} characters "
                                  f"(at most {MAX_TENSOR_ELEMENTS:,}): larger than any test's")
                memory += 2 * sys.getsizeof(arg)  # and again if it becomes bytes (_codecs.encode)
            if memory > MAX_PLAIN_MEMORY:
                raise Refused(f"your code sent the grader more plain data (lists, dicts, strings, numbers) than "
                              f"{MAX_PLAIN_MEMORY // 2**20} MiB once built: larger than any test's")
    except Refused:
        raise
    except Exception as exc:  # noqa: BLE001 (pickletools' own errors: not a pickle)
        raise ValueError(f"not a pickle ({type(exc).__name__})") from None


def check_message(value: Any) -> None:
    """Refuse a value from the kernel with a tensor, list, tuple, dict, string or bytes of more than
    :data:`MAX_TENSOR_ELEMENTS` elements (items, characters), nested deeper than :data:`MAX_DEPTH`,
    or with more than :data:`MAX_MESSAGE_ELEMENTS` elements in all (tensors' and plain data's
    together), stopping at the first bound passed (a container is counted before it is walked).

    Raises:
        Refused: saying which bound, and how far past it.
    """
    total = 0

    def count(item: Any) -> None:
        nonlocal total
        if isinstance(item, torch.Tensor):
            n, what = item.numel(), f"a tensor of shape {tuple(item.shape)}"
        elif isinstance(item, str | bytes | list | tuple | dict | set | frozenset):
            n, what = len(item), f"a {type(item).__name__}"
        else:
            return  # a number: counted as an item of its container
        if n > MAX_TENSOR_ELEMENTS:
            raise Refused(f"your code sent the grader {what} of {n:,} elements (at most {MAX_TENSOR_ELEMENTS:,}): "
                          "larger than any test's")
        total += n
        if total > MAX_MESSAGE_ELEMENTS:
            raise Refused(f"your code sent the grader more than {MAX_MESSAGE_ELEMENTS:,} elements at once "
                          "(tensors', lists', dicts' and strings' together): larger than any test's")

    def inside(item: Any) -> Any:
        if isinstance(item, dict):
            return (v for pair in item.items() for v in pair)
        return iter(item) if isinstance(item, list | tuple | set | frozenset) else None

    count(value)
    walks = [inside(value)] if inside(value) is not None else []
    while walks:  # depth first, one iterator per level (a wide list costs no copy of it)
        item = next(walks[-1], _DONE)
        if item is _DONE:
            walks.pop()
            continue
        count(item)
        inner = inside(item)
        if inner is not None:
            if len(walks) >= MAX_DEPTH:
                raise Refused("the values your code sent are nested too deeply")
            walks.append(inner)


_DONE = object()
