"""What is read from a hand-in: finding and recognising.

:func:`discover` lists the (student, assignment) pairs of ``SUBMITTED/<student>/<assignment>/``;
:func:`find_submission` reads what one such folder holds, through :mod:`.intake` (no link is ever
followed, no special file read, a size cap on every notebook), and picks the notebook to grade.

A notebook is recognised by its released cells, not by its name (:class:`Releases`): the lines of
the cells students cannot change (instructions, visible tests, the parts of answer cells outside
``### BEGIN SOLUTION``) and the ``grade_id`` of each nbgrader cell, each counted only where no other
assignment has it. Editors that drop cell metadata keep the text, so a notebook whose metadata was
stripped is recognised all the same. The rules (``docs/instructors.md``, "Statuses"):

- one notebook of this assignment under any name is graded, with a note ("graded Untitled.ipynb
  (expected 01_self_attention.ipynb)");
- a notebook that holds this assignment's released cells is this assignment's, whatever else was
  pasted into it: graded, the note naming the other assignments whose cells it also holds ("graded
  01_self_attention.ipynb, which also holds cells of 03_multi_head");
- of several notebooks of this assignment, the one graded is, in this order: one with work in it
  (lines that are not the released notebook's) over an untouched copy of the release; the expected
  name; the most recently modified; the one with more lines of its own; the first by name. The
  note names the one graded and every notebook ignored;
- notebooks of other assignments only: ``wrong-notebook``, nothing graded;
- no notebook, but other files: ``not-a-notebook``, naming them (nbgrader's ``timestamp.txt`` and
  the files shipped with the assignment are not counted);
- nothing at all, or no folder: ``missing``;
- a notebook that is a link (symbolic, or a hard link: a second name of another file), a special
  file or over the cap: ``refused`` where nothing else can be graded, else ignored (and named in the
  note), never read.

A notebook recognised as no assignment (unreadable, or written from scratch) is graded where it is
the only candidate, or has the expected name, as before: the grader says ``invalid`` where it cannot
be read (:func:`.grade.read_submission`). Nothing here raises for what a notebook holds: JSON nested too
deep to parse, not JSON, or JSON of any shape is "not a readable notebook".
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from transformer_course.grading.submission import intake
from transformer_course.layout import BLOCKS_MODULE, Assignment, read_source

# The statuses of a pair with nothing graded (no kernel ran): zero points, no submission in the gradebook.
NOT_GRADED = ("missing", "refused", "wrong-notebook", "not-a-notebook")
# A notebook holds an assignment's released cells where at least this share of the assignment's own
# marks is in it: it is the expected assignment's where that one's are there, whatever else is, else the
# assignment of the largest share. A copy of the release has them all; a notebook written from scratch
# has next to none.
MATCH = 0.3
# Distinct lines of a notebook kept to count its work by (a notebook of the course has a few hundred):
# a notebook of millions of lines is read in bounded memory.
MAX_LINES = 100_000
IGNORED_FILES = ("timestamp.txt",)  # nbgrader collect's
ARCHIVES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".7z", ".rar")
# What the release (notebook/nbgrader_setup.py) puts in a cell: kept here, where a hand-in is read, so that
# this stage imports none after it.
HIDDEN_PLACEHOLDER = "# (hidden tests run here when grading)"
STUB_MESSAGE = "not written yet: replace this line with your code, run the cell, then the tests below it"
# What nbgrader's release puts in an answer cell: not a student's work.
STUB_LINES = ("# YOUR CODE HERE", f"raise NotImplementedError({STUB_MESSAGE!r})", "raise NotImplementedError()",
               "YOUR ANSWER HERE", HIDDEN_PLACEHOLDER)


def _line(text: str) -> str:
    return " ".join(text.split())


def _lines(source: str) -> set[str]:
    """The normalised lines of a cell worth comparing (not blank, not a lone bracket)."""
    return {n for n in map(_line, source.splitlines()) if len(n) >= 6}


_TEXT_LINE = re.compile(r"[^\r\n]{6,}")  # a shorter line is never one worth comparing


def _each_line(source: str) -> Iterator[str]:
    """:func:`_lines` one at a time, for a student's cell: a cell of millions of lines is never held whole
    as a list, a set or a copy (split at line feeds and carriage returns)."""
    for match in _TEXT_LINE.finditer(source):
        if len(line := _line(match.group())) >= 6:
            yield line


def _released_lines(source: str, solution: bool) -> set[str]:
    """The lines of a source cell that the release has too: without the solution's and the hidden
    tests' regions (an answer cell without markers is replaced whole)."""
    if solution and "### BEGIN SOLUTION" not in source:
        return set()
    kept, inside = [], False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith(("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS")):
            inside = True
        elif stripped.startswith(("### END SOLUTION", "### END HIDDEN TESTS")):
            inside = False
        elif not inside:
            kept.append(line)
    return _lines("\n".join(kept))


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _grade_id(cell: dict) -> str | None:
    meta = cell.get("metadata")
    nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
    gid = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
    return gid if isinstance(gid, str) else None


@dataclass(frozen=True)
class Recognised:
    """What a notebook was recognised as: ``assignment`` (None: none of the course's), the share of
    that assignment's marks found in it, how many of its lines are not the release's (its work), and
    the other assignments whose released cells it holds too (``also``, by name)."""

    assignment: str | None
    share: float
    worked: int
    also: tuple[str, ...] = ()


class Releases:
    """The released cells of each assignment of the course, read from its nbgrader source (what
    the grader grades against), to recognise a notebook by its cells."""

    def __init__(self, assignments: list[Assignment]):
        own: dict[str, set[str]] = {}
        self.released: dict[str, set[str]] = {}
        for a in assignments:
            marks, lines = set(), set(STUB_LINES)
            for cell in read_source(a.source_file).cells:
                meta = cell.metadata.get("nbgrader", {})
                released = _released_lines(cell.source, bool(meta.get("solution")))
                lines |= released
                marks |= {f"line:{n}" for n in released if n not in STUB_LINES}
                if meta.get("grade_id"):
                    marks.add(f"id:{meta['grade_id']}")
            own[a.name], self.released[a.name] = marks, lines
        # A mark two assignments share (an import, a shared instruction) tells neither apart.
        self.marks = {name: {m for m in marks if not any(m in o for n, o in own.items() if n != name)}
                      for name, marks in own.items()}

    def to_json(self) -> str:
        """The marks and released lines, as JSON: what a grader that holds one assignment's source alone
        (the Gradescope autograder) needs to recognise the others. Released text only, no answer."""
        return json.dumps({"marks": {n: sorted(m) for n, m in self.marks.items()},
                           "released": {n: sorted(r) for n, r in self.released.items()}}, indent=0)

    @classmethod
    def from_json(cls, text: str) -> Releases:
        """The releases :meth:`to_json` wrote.

        Raises:
            ValueError: ``text`` is not what :meth:`to_json` writes.
        """
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) != {"marks", "released"}:
            raise ValueError("not the course's releases (expected the keys marks and released)")
        releases = cls([])
        releases.marks = {n: set(m) for n, m in data["marks"].items()}
        releases.released = {n: set(r) for n, r in data["released"].items()}
        return releases

    def recognise(self, nb: dict, expected: str | None = None) -> Recognised:
        """The assignment whose release ``nb`` (a parsed notebook's JSON) is a copy of, by its cells:
        ``expected`` wherever its released cells are there (whatever else was added: the others found
        are in ``also``), else the assignment most of whose marks are there. ``expected``: also the
        assignment its work is counted against when it is none of the course's. Never raises for what
        ``nb`` holds (anything that is not a cell, or text where text is expected, is skipped)."""
        cells = [c for c in nb.get("cells", []) if isinstance(c, dict)] if isinstance(nb.get("cells"), list) else []
        lines: set[str] = set()
        found: set[str] = set()
        known = set().union(*self.marks.values())  # the only lines worth keeping to recognise it by
        for cell in cells:
            for line in _each_line(_source(cell)):
                if len(lines) < MAX_LINES:  # enough to count work by; a notebook of endless lines is not kept
                    lines.add(line)
                if (mark := f"line:{line}") in known:
                    found.add(mark)
            if gid := _grade_id(cell):
                found.add(f"id:{gid}")
        shares = {name: len(marks & found) / len(marks) for name, marks in self.marks.items() if marks}
        there = {name for name, share in shares.items() if share >= MATCH}
        if not there:
            best = max(shares, key=shares.__getitem__, default=None)
            worked = len(lines - self.released.get(expected, set())) if expected else len(lines)
            return Recognised(None, shares[best] if best else 0.0, worked)
        # the expected assignment's cells are there: it is graded, whatever else was pasted in beside them
        best = expected if expected in there else max(there, key=lambda n: (shares[n], n))
        return Recognised(best, shares[best], len(lines - self.released[best]), tuple(sorted(there - {best})))


def _parse(data: bytes) -> dict | None:
    """The notebook's JSON (read as the grader reads it: UTF-8, else Windows-1252/latin-1), or None
    where it is not a JSON object or is nested too deep to parse safely (:func:`.intake.notebook_json`:
    never raises; the grader says why when it reads the notebook)."""
    return intake.notebook_json(intake.decoded(data)[0])[0]


@dataclass
class Handed:
    """What a student handed in for one assignment, read by :func:`find_submission`."""

    path: Path | None  # the notebook read (None: nothing to grade)
    data: bytes | None  # its bytes, read without following a link
    note: str  # how it was found ("graded X.ipynb (expected ...)"), or why there is nothing to grade
    status: str = ""  # "" with a notebook to grade, else one of NOT_GRADED (the note starts with the reason)
    unusual: bool = False  # not the expected notebook alone: the run's summary lists it
    ignored: list[str] = field(default_factory=list)  # notebooks there that were not graded

    @property
    def refused(self) -> bool:
        """A link, a special file or over the size cap: ``note`` says which; nothing read."""
        return self.status == "refused"


@dataclass
class _Candidate:
    name: str
    data: bytes | None = None
    refused: str = ""
    seen: Recognised | None = None
    mtime: float = 0.0


def _missing(expected: str) -> Handed:
    return Handed(None, None, f"missing: {expected} was not handed in", "missing")


def find_submission(folder: Path, assignment: Assignment, max_mb: float | None = intake.DEFAULT_MAX_MB,
                    known: Releases | None = None) -> Handed:
    """The notebook to grade in ``folder`` (``SUBMITTED/<student>/<assignment>``), read, and a note,
    by the module's rules. ``known``: the course's releases, to recognise notebooks by their cells
    (default: this assignment's alone, so another assignment's notebook is not recognised as such).
    Nothing is followed (:mod:`.intake`): a folder or notebook that is a symbolic link or a special
    file, a notebook with a second name (a hard link), or a notebook over ``max_mb`` MiB, is never read,
    and the note names it. Never raises for what a notebook holds (:func:`.intake.notebook_json`)."""
    expected = f"{assignment.notebook}.ipynb"
    submitted, relative = folder.parent.parent, Path(folder.parent.name, folder.name)
    kind = intake.describe(folder)
    if kind == "missing":
        return Handed(None, None, f"missing: no folder {assignment.name}/ was handed in", "missing")
    if kind == "a regular file":
        return Handed(None, None, f"missing: {assignment.name} was handed in as a file, not a folder", "missing")
    try:
        entries = intake.listing(submitted, relative)
    except intake.Refused as exc:
        return Handed(None, None, f"refused: {exc}", "refused", unusual=True)
    except FileNotFoundError:  # removed while the run looked
        return _missing(expected)
    shipped = set(IGNORED_FILES) | set(assignment.provided) | {BLOCKS_MODULE}
    visible = [(n, k) for n, k in entries if not n.startswith(".") and n not in shipped and n != "__pycache__"]
    candidates = [_Candidate(n) for n, _ in visible if n.lower().endswith(".ipynb")]
    if not candidates:
        others = [n + ("/" if k == "a folder" else "") for n, k in visible]
        if others:
            archives = [n for n in others if n.lower().endswith(ARCHIVES)]
            hint = (f"; {', '.join(archives)}: an archive is never unpacked by grading (`transformer-course "
                    "collect` unpacks an LMS's download)") if archives else ""
            return Handed(None, None, f"not a notebook: found {', '.join(others)} (no .ipynb notebook{hint})",
                          "not-a-notebook", unusual=True)
        return _missing(expected)
    known = known or Releases([assignment])
    cap = None if max_mb is None else int(max_mb * 2**20)
    for c in candidates:
        try:
            c.data = intake.read(submitted, relative / c.name, cap)
        except intake.Refused as exc:
            c.refused = f"refused: {exc}"
            continue
        except FileNotFoundError:
            continue
        nb = _parse(c.data)
        c.seen = known.recognise(nb, assignment.name) if nb is not None else None
        try:
            c.mtime = os.lstat(folder / c.name).st_mtime
        except OSError:
            pass
    readable = [c for c in candidates if c.data is not None]
    if not readable:
        refused = [c.refused for c in candidates if c.refused]
        if refused:
            return Handed(None, None, "; ".join(refused), "refused", unusual=True)
        return _missing(expected)
    mine = [c for c in readable if c.seen is not None and c.seen.assignment == assignment.name]
    unknown = [c for c in readable if c.seen is None or c.seen.assignment is None]
    pool = mine or unknown
    if not pool:  # every notebook there is another assignment's
        return _wrong(assignment, readable, known)

    def rank(c: _Candidate) -> tuple:
        worked = c.seen.worked if c.seen else 0
        return (worked > 0 or c.seen is None, c.name == expected, c.mtime, worked, [-ord(ch) for ch in c.name])

    chosen = max(pool, key=rank)
    ignored = [c for c in candidates if c is not chosen]
    also = chosen.seen.also if chosen.seen else ()
    note = f"graded {chosen.name}" + (f" (expected {expected})" if chosen.name != expected else "")
    if also:  # graded all the same: its own cells are there; the others' are named
        note += f", which also holds cells of {', '.join(also)}"
    if ignored:
        note += "; ignored " + ", ".join(_why_ignored(c, assignment) for c in ignored)
    note = "" if chosen.name == expected and not ignored and not also else note + ". "
    return Handed(folder / chosen.name, chosen.data, note, unusual=bool(note), ignored=[c.name for c in ignored])


def _why_ignored(c: _Candidate, assignment: Assignment) -> str:
    """An ignored notebook's name, and why where it is not simply another copy of this assignment's."""
    if c.refused:
        return f"{c.name} ({c.refused})"
    if c.data is None:
        return f"{c.name} (gone while the run read it)"
    if c.seen is None:
        return f"{c.name} (not a readable notebook)"
    if c.seen.assignment is None:
        return f"{c.name} (not recognised as this assignment's notebook)"
    if c.seen.assignment != assignment.name:
        return f"{c.name} ({c.seen.assignment}'s notebook)"
    return c.name + (" (the released notebook, no work in it)" if not c.seen.worked else "")


def _wrong(assignment: Assignment, readable: list[_Candidate], known: Releases) -> Handed:
    found = [(c.name, c.seen.assignment) for c in readable if c.seen and c.seen.assignment]
    if len(found) == 1:
        (name, other), = found
        reason = (f"wrong notebook: this is {other}'s notebook ({name}), handed in as {assignment.name}; "
                  f"hand in {assignment.notebook}.ipynb")
    else:
        reason = ("wrong notebook: these are other assignments' notebooks (" + ", ".join(
            f"{name}: {other}'s" for name, other in found) + f"), handed in as {assignment.name}; hand in "
            f"{assignment.notebook}.ipynb")
    return Handed(None, None, reason, "wrong-notebook", unusual=True, ignored=[n for n, _ in found])


def discover(submitted: Path, assignments: list[Assignment]) -> tuple[list[tuple[str, Assignment, Path]], list[str]]:
    """Every (student, assignment) pair to grade: each student folder x each assignment, and a
    warning for each entry of ``submitted`` that is not graded (hidden folders, symbolic links,
    which are reported and never followed, and plain files).

    Raises:
        FileNotFoundError: ``submitted`` is not a folder.
    """
    if not submitted.is_dir():
        raise FileNotFoundError(f"{submitted} is not a folder; expected SUBMITTED/<student_id>/<assignment>/")
    students, warnings = [], []
    for entry in sorted(submitted.iterdir()):
        if entry.is_symlink():
            warnings.append(f"{entry.name!r} is a symbolic link (to {os.readlink(entry)}): not followed, not graded; "
                            "copy the folder in if it is a student's")
        elif not entry.is_dir():
            warnings.append(f"{entry.name!r} is a file, not a student folder: not graded")
        elif entry.name.startswith("."):
            if entry.name != ".ipynb_checkpoints":
                warnings.append(f"{entry.name!r} is a hidden folder: not graded; rename it if it is a student's")
        elif not _text(entry.name):  # no table, page or gradebook can hold it as a student id
            warnings.append(f"{ascii(entry.name)} is not a name in text (bytes that are not UTF-8, or control "
                            "characters): not graded; rename the folder to the student's id")
        else:
            students.append(entry)
    return [(s.name, a, s / a.name) for s in students for a in assignments], warnings


def _text(name: str) -> bool:
    """Whether a folder's name is text a student id can be: UTF-8 (no undecodable bytes), no control character."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return name.isprintable()


def summary(notices: list[str]) -> str:
    """The run's block of hand-ins that were not the expected notebook alone ('' when there are none)."""
    if not notices:
        return ""
    return (f"hand-ins not as expected ({len(notices)}; each one's reason is in grades.csv's reason column):\n"
            + "\n".join(f"  {n}" for n in notices))

