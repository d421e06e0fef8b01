"""What the kernel sends, read back with its sizes bounded before anything of it is built.

Each message from the kernel (``wire.encode``'s text) comes from code the student controls. Read with
``torch.load(weights_only=True)`` it builds no object of code, but a few bytes of it could unpack, or
build, plain data (lists, dicts, strings, numbers) of any size. So its text's length, its archive's
records, its pickled plain data and what that would build are bounded first (:func:`decode`), then the
elements of each list, dict, string and tensor in it and of the whole message (:func:`check_message`,
with :mod:`.sizes`' bounds); a refused message raises :class:`~.lending.Refused`, saying which bound.
"""

from __future__ import annotations

import base64
import io
import pickletools
import sys
import zipfile
from typing import Any

import torch

from transformer_course.grading.judging.lending import Refused
from transformer_course.grading.judging.sizes import MAX_MESSAGE_ELEMENTS, MAX_TENSOR_ELEMENTS
from transformer_course.grading.kernel import wire
from transformer_course.grading.kernel.wire import MAX_ANSWER_CHARS

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
# Levels of a whole message (a value's own nesting, at most 32 in :func:`.sizes.tensors`, is about twice
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
