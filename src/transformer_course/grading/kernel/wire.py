"""The messages between the judge and the recorder, as text over the kernel's stdin channel.

Both halves use this module: the grader imports it, and the kernel runs its text first of the
recorder's (:data:`.link.SOURCES`). A message of plain numbers and strings, the most common,
goes as a Python literal (:func:`literal`); one of plain values and dense tensors as the tensors'
bytes and a literal (:func:`raw`); anything else as ``torch.save`` bytes (base64) that the grader
reads back with ``weights_only=True`` (:func:`.decoding.decode`, with its sizes bounded first).
"""

from __future__ import annotations

import ast
import base64
import io
import math
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
