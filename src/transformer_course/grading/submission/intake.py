"""Reading what a student handed in without following anything: no symbolic link, no special file.

A submission folder comes from a git repository (GitHub Classroom), a tar or zip archive or an LMS
export, and all of these can carry symbolic links: a notebook that is a link to the course's
``solutions/`` folder, or an assignment folder that is a link to a classmate's, would otherwise be
read and graded as the student's own. Every path below ``SUBMITTED/<student>`` is opened one component
at a time, relative to the folder opened before it, with ``O_NOFOLLOW`` (a link is refused, never
resolved, also if it is swapped in while the grader reads), and the file must be a regular file
(a fifo would block the read, a device could be endless) with one name (a hard link to the solution or
to a classmate's notebook is that file under a second name: refused like a symbolic link) and no larger
than the size cap, all checked on the open file before a byte is read.

:func:`notebook_json` parses a notebook's text for the grader's readers and never raises: a document
nested deeper than :data:`MAX_DEPTH` is turned away before it is parsed (Python's JSON parser and
nbformat recurse once per level: 2 KB of brackets a thousand deep end in ``RecursionError``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np

DEFAULT_MAX_MB = 50.0  # a notebook of this course with every output is under 5 MiB
# Levels of nesting a notebook's JSON may have. The course's notebooks have 9; nbformat's reader and
# validator still work at 300 levels (and fail at 500).
MAX_DEPTH = 64
# Cells a notebook may hold: this many times its release's (a student adds a few scratch cells; 30,000
# cells held a worker four minutes and 60,000 took the grade process to 950 MB), and never fewer than
# MIN_CELL_CAP. The course's largest release (08_modern_decoder) has 86 cells: 860.
CELLS_PER_RELEASED_CELL = 10
MIN_CELL_CAP = 500


def cell_cap(released: int) -> int:
    """The most cells a hand-in of an assignment whose release has ``released`` cells may hold."""
    return max(MIN_CELL_CAP, CELLS_PER_RELEASED_CELL * released)


class Refused(OSError):
    """A path that is a symbolic link or a special file, or a file over the size cap: not read."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe (fifo)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def describe(path: Path) -> str:
    """What ``path`` is, without following it: 'a symbolic link (to X)', 'a device', ..."""
    try:
        st = os.lstat(path)
    except OSError:
        return "missing"
    kind = _kind(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        with contextlib.suppress(OSError):
            kind += f" (to {os.readlink(path)})"
    return kind


@contextlib.contextmanager
def _folder(root: Path, parts: tuple[str, ...]) -> Iterator[int]:
    """A descriptor of ``root/parts...``, each component opened without following a link.

    Raises:
        Refused: a component is a link or not a folder (the message names it).
        FileNotFoundError: a component does not exist.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        where = root
        for part in parts:
            where = where / part
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except (NotADirectoryError, OSError) as exc:
                if isinstance(exc, FileNotFoundError):
                    raise
                raise Refused(f"{where.relative_to(root)} is {describe(where)}, not a folder: not followed") \
                    from None
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def read(root: Path, relative: Path, max_bytes: int | None = None) -> bytes:
    """The bytes of ``root/relative``, where ``root`` is trusted (``SUBMITTED/<student>``'s parent, say)
    and nothing in ``relative`` is followed: every folder and the file itself must be what it looks
    like. ``max_bytes``: refuse a larger file before reading it (None: no cap).

    Raises:
        Refused: a component is a symbolic link, the file is not a regular file, has more than one
            name (a hard link), or is too big; the message names the path (relative to ``root``) and
            says which.
        FileNotFoundError: the file or a folder on the way does not exist.
    """
    *folders, name = relative.parts
    shown = relative
    with _folder(root, tuple(folders)) as fd:
        try:
            # O_NONBLOCK: opening a fifo must not wait for a writer (it is refused just below).
            file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except FileNotFoundError:
            raise
        except OSError:  # ELOOP: the name is a symbolic link
            raise Refused(f"{shown} is {describe(root / relative)}: not followed, not read") from None
        try:
            st = os.fstat(file)
            if not stat.S_ISREG(st.st_mode):
                raise Refused(f"{shown} is {_kind(st.st_mode)}, not a file: not read")
            if st.st_nlink > 1:  # the same file as another name: the solution's, a classmate's
                raise Refused(f"{shown} is a hard link ({st.st_nlink} names for one file, which may be the "
                              "solution's or a classmate's): not followed, not read")
            if max_bytes is not None and st.st_size > max_bytes:
                raise Refused(f"{shown} is {st.st_size / 2**20:.1f} MiB, over the {max_bytes / 2**20:g} MiB a "
                              "submission may have (--max-submission-mb): not read")
            with open(file, "rb", closefd=False) as f:  # a file that grows while it is read is still cut at the cap
                data = f.read(-1 if max_bytes is None else max_bytes + 1)
            if max_bytes is not None and len(data) > max_bytes:
                raise Refused(f"{shown} grew over the {max_bytes / 2**20:g} MiB cap while it was read: not read")
            return data
        finally:
            os.close(file)


def listing(root: Path, relative: Path) -> list[tuple[str, str]]:
    """(name, kind) of each entry of the folder ``root/relative``, reached without following a link
    (:func:`read`'s rule), each entry described without following it.

    Raises:
        Refused: a folder on the way is a symbolic link or not a folder.
        FileNotFoundError: a folder on the way does not exist.
    """
    with _folder(root, relative.parts) as fd:
        found = []
        for name in sorted(os.listdir(fd)):
            try:
                found.append((name, _kind(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)))
            except OSError:  # removed meanwhile
                continue
        return found


def decoded(data: bytes) -> tuple[str, str]:
    """A notebook's text and the encoding it was read in ("" for UTF-8). Notebooks are UTF-8 JSON; one
    saved in another encoding by an editor is read all the same, as Windows-1252, else latin-1 (cp1252
    leaves five bytes undefined; latin-1 decodes any byte)."""
    try:
        return data.decode("utf-8-sig"), ""
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252"), "Windows-1252"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


# A JSON string (escapes removed before: see deeper_than) or a run of characters that are neither brackets
# nor quotes: what is left is the document's brackets, whose nesting is the document's. No repetition of a
# group: the regular expression keeps no state per character (an escape-aware one kept 500 MB on 5 million
# escapes).
_NOT_BRACKETS = re.compile(r'"[^"]*"|[^\[\]{}"]+')
_STEPS = np.zeros(256, dtype=np.int8)  # one level in at an opening bracket, one out at a closing one
_STEPS[[ord("["), ord("{")]], _STEPS[[ord("]"), ord("}")]] = 1, -1
_CHUNK = 1 << 20


def deeper_than(text: str, levels: int = MAX_DEPTH) -> bool:
    """Whether the JSON document ``text`` nests more than ``levels`` arrays and objects deep, found
    without parsing it and without recursion: its brackets (a regular expression drops the strings and
    everything else), then their running depth in numpy, a megabyte at a time. Exact for a JSON
    document; brackets that do not pair (not JSON) are left to the parser to refuse."""
    # An escaped backslash, then an escaped quote, is no delimiter (read left to right, as JSON pairs them).
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    brackets = np.frombuffer(_NOT_BRACKETS.sub("", unescaped).encode("ascii"), dtype=np.uint8)
    del unescaped
    depth = 0
    for start in range(0, len(brackets), _CHUNK):
        running = np.cumsum(_STEPS[brackets[start:start + _CHUNK]], dtype=np.int64) + depth
        if running.max() > levels:
            return True
        depth = int(running[-1])
    return False


def notebook_json(text: str) -> tuple[dict | None, str]:
    """A notebook's text (as :func:`decoded` gives it) parsed as JSON, and why not: ``(None, reason)``
    where it is nested deeper than :data:`MAX_DEPTH`, is not JSON, or is JSON but not an object. Never
    raises for anything the text holds (the parser's ``RecursionError``, ``MemoryError`` and
    ``ValueError`` included); the reason is a phrase ("nested more than 64 levels deep ...")."""
    try:
        if deeper_than(text):
            return None, f"nested more than {MAX_DEPTH} levels deep; a notebook has about 10"
        nb = json.loads(text)
    except ValueError:  # JSONDecodeError; a UnicodeError too
        return None, "not valid JSON: cut off or damaged?"
    except (RecursionError, MemoryError) as exc:
        return None, f"not readable as JSON ({type(exc).__name__})"
    if not isinstance(nb, dict):
        return None, f"a JSON {type(nb).__name__}, not a notebook (a JSON object)"
    return nb, ""
