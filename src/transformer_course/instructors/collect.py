"""``transformer-course collect``: an LMS's download of submissions, unpacked into nbgrader's layout.

The grader never unpacks an archive; this step does, explicitly, and writes
``SUBMITTED/<student_id>/<assignment>/<the student's files>``, which ``transformer-course grade`` reads.

The layouts (``--layout``, else detected from the names in the source):

``canvas``
    Canvas's "Download Submissions" zip: one flat file per attachment, named by Canvas's
    ``ContentZipper`` (instructure/canvas-lms, lib/content_zipper.rb, ``get_filename`` and
    ``add_upload_submission``): ``<sortable name, lower case, letters and digits only>[_LATE]_<user
    id>_<attachment id>_<file name as handed in>``; an anonymous assignment has ``anon_<anonymous id>``
    for the name and the user id (anonymous when every file is named so). A named student's prefix
    always holds the name, so a name of digits (``12345_67890_...``) stays a name and ``67890`` the id.
    A resubmitted file keeps the name Canvas gave it (``01_x-1.ipynb``).
    The student id is the user id; only the prefix is stripped from the file's name. ``LATE`` is
    Canvas's flag, not a time: it goes to ``students.csv`` and decides the hand-in's time (below).
``moodle``
    Moodle's "Download all submissions" zip (mod/assign, ``classes/downloader.php``
    ``get_student_prefix`` and ``load_submissionplugin_filelist``): a folder per student and plugin,
    ``<Full Name>_<participant id>_assignsubmission_file[_]/<file>`` (Moodle 3.1 and later; underscores in
    the name are spaces), or flat ``<Full Name>_<participant id>_assignsubmission_file_<file>``. The
    student id is the participant id; files of other submission plugins (online text) are skipped.
``classroom``
    A folder of GitHub Classroom clones, ``<repository prefix><username>/`` each, with the notebook at
    ``course/<assignment>/<assignment>.ipynb``: the assignment's notebooks are copied from there. The
    student id is the username: the folder's name without the prefix the clones share (``--prefix``).
``nbgrader``
    A zip or tar (or a folder) already in nbgrader's layout, ``<student_id>/<assignment>/<files>``,
    perhaps under one top folder: this assignment's folders are copied as they are (``timestamp.txt``
    included).

Hand-in times (``times.csv`` beside ``students.csv``, see :mod:`transformer_course.lms.times`; the
grader's ``submitted_at`` reads them). Neither LMS's download holds a submission time: Canvas's
``ContentZipper`` writes each entry through rubyzip's ``get_output_stream`` without a time, so the entry
gets rubyzip's default, ``Zip::DOSTime.now`` (rubyzip lib/zip/entry.rb): the moment the zip was made;
Moodle's ``downloader::download_zip`` calls ``add_file_from_stored_file`` without a time, and its
``zip_writer`` then stamps the current time too (core_files ``archive_writer``). An archive's times are
therefore never taken (taking them made every student of a download made 9 hours after the due date
9 hours late). In this order, per hand-in:

1. ``--times FILE.csv`` (:func:`read_times`): its time, wherever it came from (the LMS's API, a
   gradebook, the instructor); source ``--times <file>``.
2. ``canvas``: not marked ``LATE`` by Canvas: on time (Canvas compared the submission with its due
   date), source :data:`CANVAS_ON_TIME`, no time; marked ``LATE``: late, time unknown, source
   :data:`CANVAS_LATE`: the grader flags it to be checked by hand and takes no penalty.
3. ``moodle``: ``--worksheet WORKSHEET.csv --worksheet-zone ZONE`` (:func:`read_worksheet_times`): the
   grading worksheet's ``Last modified (submission)``, the submission's own modification time, to the
   minute; else time unknown, source :data:`MOODLE_NO_TIME`: flagged, no penalty.
4. ``nbgrader``: the hand-in's own ``timestamp.txt`` (nbgrader's exchange); ``classroom``: none.

A ``timestamp.txt`` among a Canvas, Moodle or Classroom hand-in's files is the student's, not the LMS's:
it is skipped (the grader would take it for the hand-in time).

Safety: nothing but regular files is written. Symbolic and hard links are skipped, special files
(devices, fifos) refused, a path that is absolute, has ``..`` or a drive letter is refused. Written
files are ``rw-r--r--`` whatever the archive says. Each skipped or refused member is reported once,
at the end.

One boundary per student (``_write``, around :func:`_collect_hand_in`): once a member is known to be
a student's, anything wrong with it refuses that student's hand-in whole, reported with its reasons
(``Report.refused_students``), and never stops the run. Before anything is written
(:func:`check_hand_in`): a path that cannot be a file in the student's folder, the same path more than
once (every copy refused: which one the student meant is not this step's to guess; Canvas itself never
names two files alike), a name that is both a file and a folder, two paths or two student ids one
case-insensitive or Unicode-normalising disk would take for one, one student given two names, and the
caps per file (``--max-file-mb``), per student (``--max-files``, ``--max-student-mb``), each with its
figure. All the accepted hand-ins together over ``--max-total-files`` or ``--max-mb`` stop the step
before anything is written. While writing, each hand-in goes to a temporary folder inside ``--into``
and arrives in one rename: a student's folder is complete or absent, whatever fails (a damaged member,
one that inflates past its cap: the bytes are counted while written). A fault of ``--into`` itself
(read-only, full, not a folder) stops the step with one line (:class:`CollectError`); the students
written before it are complete. ``students.csv`` goes through the spreadsheet-safe writer
(``grading/output/spreadsheet.py``): a name that starts with ``=`` is text.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import errno
import os
import re
import shutil
import stat
import sys
import tarfile
import tempfile
import unicodedata
import zipfile
import zoneinfo
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from transformer_course.grading.output.atomic import atomic_write
from transformer_course.grading.output.spreadsheet import csv_text, original, read_rows
from transformer_course.lms import times as lms_times

LAYOUTS = ("canvas", "moodle", "classroom", "nbgrader")
STUDENTS_CSV = "students.csv"
CHUNK = 1 << 16
# Canvas (lib/content_zipper.rb, get_filename): "<name>[_LATE]_<user id>" or "[LATE_]anon_<id>", then
# "_<attachment id>_<file>". A named student's prefix always has its name and its "_" (the name may be
# empty, or digits: it stays a name); Canvas takes "_<digits>_" out of names, so the first such match
# after the name is the user id.
CANVAS_NAMED = re.compile(r"^(?P<name>[^/]*?)_(?P<late>LATE_)?(?P<uid>\d+)_(?P<fid>\d+)_(?P<file>[^/]+)$")
CANVAS_ANON = re.compile(r"^(?P<late>LATE_)?(?P<uid>anon_[A-Za-z0-9]+)_(?P<fid>\d+)_(?P<file>[^/]+)$")
# Moodle: <name>_<participant id>_assignsubmission_<plugin>[_]/<path> or ..._assignsubmission_<plugin>_<file>.
MOODLE = re.compile(r"^(?P<name>[^/_]*)_(?P<pid>\d+)_assignsubmission_(?P<plugin>[a-z0-9]+)"
                    r"(?:_?/(?P<inner>.+)|_(?P<flat>[^/]+))$")
# The source, in times.csv, of a hand-in whose download decides its lateness without a time (see the
# module docstring); the grader (deadlines.submitted_at) reads these three words.
CANVAS_ON_TIME = "canvas download: not marked LATE"
CANVAS_LATE = "canvas download: marked LATE, no time"
MOODLE_NO_TIME = "moodle download: no time"
TIMELESS = (CANVAS_ON_TIME, CANVAS_LATE, MOODLE_NO_TIME)
TIMES_COLUMNS = ("student_id", "assignment", "submitted_at")
STAMP = "timestamp.txt"
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]*$")
DRIVE = re.compile(r"^[A-Za-z]:")


class CollectError(Exception):
    """Nothing could be collected: the message says why, in one line."""


@dataclass
class Member:
    """One regular file of the source: its path (posix, relative), declared size and time."""

    name: str
    size: int
    open: Callable[[], BinaryIO]
    mtime: float | None = None


@dataclass
class Report:
    layout: str
    detected: bool
    assignment: str
    collected: dict[str, list[str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    refused_students: dict[str, list[str]] = field(default_factory=dict)
    times: dict[str, list[str]] = field(default_factory=dict)  # a time's source -> the hand-ins it decides

    def refuse(self, student: str, reasons: list[str]) -> None:
        """``student``'s hand-in is not written, for ``reasons``."""
        self.refused_students.setdefault(student, []).extend(reasons)

    def summary(self) -> str:
        how = "detected" if self.detected else "as asked"
        lines = [f"layout: {self.layout} ({how})"]
        if self.collected:
            lines.append(f"collected {len(self.collected)} student{'s' * (len(self.collected) != 1)} for "
                         f"{self.assignment}: " + ", ".join(f"{s} ({len(f)} file{'s' * (len(f) != 1)})"
                                                             for s, f in sorted(self.collected.items())))
        for source, hand_ins in sorted(self.times.items()):
            # Canvas's LATE flag is not a time: the grader flags these to be checked, with no penalty
            why = " (late, time unknown: check by hand, or give --times)" if source == CANVAS_LATE else ""
            lines.append(f"hand-in times: {source}{why}: {', '.join(sorted(hand_ins))}")
        if self.refused_students:
            lines.append(f"refused {len(self.refused_students)} student{'s' * (len(self.refused_students) != 1)}"
                         " (nothing written for them):")
            lines += [f"  refused: {student}: {'; '.join(reasons)}"
                      for student, reasons in sorted(self.refused_students.items())]
        if self.skipped or self.refused:
            lines.append(f"{len(self.skipped)} skipped, {len(self.refused)} refused:")
            lines += [f"  skipped: {line}" for line in self.skipped]
            lines += [f"  refused: {line}" for line in self.refused]
        # names come from the source: a control character (a terminal's escape) is shown, not sent
        return "\n".join("".join(c if c == "\n" or unicodedata.category(c)[0] != "C" else ascii(c)[1:-1]
                                 for c in line) for line in lines)


def safe_path(name: str) -> PurePosixPath:
    """``name`` as a relative path that stays inside the destination.

    Raises:
        ValueError: an absolute path, a drive letter, a ``..`` part or an empty path.
    """
    text = name.replace("\\", "/")
    if text.startswith("/") or DRIVE.match(text):
        raise ValueError("absolute path")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError("'..' in the path: out of the destination")
    if not parts:
        raise ValueError("empty path")
    return PurePosixPath(*parts)


def copy_capped(source: BinaryIO, target: Path, limit: int) -> int:
    """Copies ``source`` to a new file ``target`` (mode rw-r--r--), at most ``limit`` bytes; the bytes written.

    Raises:
        OverflowError: the source holds more than ``limit`` bytes (``target`` is removed).
    """
    written = 0
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := source.read(min(CHUNK, limit - written + 1)):
                written += len(chunk)
                if written > limit:
                    raise OverflowError(f"more than {limit} bytes when unpacked")
                out.write(chunk)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return written


# -- reading the source: regular files only, everything else reported --------------------------------

def _zip_members(path: Path, report: Report) -> tuple[list[Member], Callable[[], None]]:
    archive = zipfile.ZipFile(path)
    members = []
    for info in archive.infolist():
        kind = stat.S_IFMT(info.external_attr >> 16) if info.create_system == 3 else 0
        if info.is_dir() or kind == stat.S_IFDIR:
            continue
        if kind == stat.S_IFLNK:
            report.skipped.append(f"{info.filename} (a symbolic link)")
        elif kind not in (0, stat.S_IFREG):
            report.refused.append(f"{info.filename} (a special file, not a regular one)")
        else:
            mtime = dt.datetime(*info.date_time).timestamp() if info.date_time[0] >= 1980 else None
            members.append(Member(info.filename, info.file_size, lambda i=info: archive.open(i), mtime))
    return members, archive.close


def _tar_members(path: Path, report: Report) -> tuple[list[Member], Callable[[], None]]:
    archive = tarfile.open(path, "r:*")
    members = []
    # tarfile's own "data" filter (Python 3.11.4+) judges each member as extraction would; this
    # step writes each file itself, so that the bytes can be counted.
    destination = tempfile.gettempdir()
    for info in archive:
        if info.isdir():
            continue
        if info.issym() or info.islnk():
            report.skipped.append(f"{info.name} (a {'symbolic' if info.issym() else 'hard'} link to "
                                  f"{info.linkname})")
            continue
        if not info.isfile():
            report.refused.append(f"{info.name} (a special file: {_tar_kind(info)})")
            continue
        try:
            tarfile.data_filter(info, destination)
        except tarfile.FilterError as exc:
            report.refused.append(f"{info.name} ({type(exc).__name__}: {exc})")
            continue
        members.append(Member(info.name, info.size, lambda i=info: archive.extractfile(i), float(info.mtime)))
    return members, archive.close


def _tar_kind(info: tarfile.TarInfo) -> str:
    for test, name in ((info.isfifo, "a fifo"), (info.ischr, "a character device"), (info.isblk, "a block device")):
        if test():
            return name
    return f"type {info.type!r}"


def _folder_members(root: Path, report: Report) -> list[Member]:
    members = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        for name in list(dirs):
            if name == ".git":  # a clone's history: not a submission
                dirs.remove(name)
            elif (here / name).is_symlink():
                dirs.remove(name)
                report.skipped.append(f"{(here / name).relative_to(root).as_posix()} (a symbolic link)")
        for name in files:
            path = here / name
            relative = path.relative_to(root).as_posix()
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                report.skipped.append(f"{relative} (a symbolic link)")
            elif not stat.S_ISREG(info.st_mode):
                report.refused.append(f"{relative} (a special file, not a regular one)")
            elif info.st_nlink > 1:
                report.skipped.append(f"{relative} (a hard link: {info.st_nlink} names for one file)")
            else:
                members.append(Member(relative, info.st_size, lambda p=path: open(p, "rb"), info.st_mtime))
    return members


@contextmanager
def _members(source: Path, report: Report) -> Iterator[list[Member]]:
    if source.is_dir():
        yield _folder_members(source, report)
        return
    if zipfile.is_zipfile(source):
        members, close = _zip_members(source, report)
    elif tarfile.is_tarfile(source):
        members, close = _tar_members(source, report)
    else:
        raise CollectError(f"{source} is neither a folder, a zip nor a tar archive")
    try:
        yield members
    finally:
        close()


# -- what goes where: each student's hand-in, and what is wrong with it -------------------------------

@dataclass(frozen=True)
class Caps:
    """The most a source may unpack to. A hand-in over a per-file or per-student cap is that student's
    refusal; all the hand-ins together over a total cap stop the step before anything is written."""

    file_bytes: int = 50 << 20  # --max-file-mb
    student_bytes: int = 100 << 20  # --max-student-mb
    student_files: int = 100  # --max-files
    total_bytes: int = 200 << 20  # --max-mb
    total_files: int = 10_000  # --max-total-files


@dataclass
class HandIn:
    """One student's files for the assignment (path in the assignment's folder, member), the names the
    source gives the student, and the problems found: a hand-in with any problem is refused whole."""

    files: list[tuple[PurePosixPath, Member]] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


@dataclass
class Plan:
    hand_ins: dict[str, HandIn] = field(default_factory=dict)
    late: set[str] = field(default_factory=set)

    def add(self, student: str, inner: str, member: Member, report: Report, name: str | None = None) -> None:
        """``member`` as ``student``'s file ``inner``: a path that cannot be a file in the student's
        folder is the student's problem; an id that cannot be a folder name, the member's refusal."""
        if not SAFE_ID.match(student):
            report.refused.append(f"{member.name} (student id {student!r} is not a safe folder name)")
            return
        hand_in = self.hand_ins.setdefault(student, HandIn())
        if name:
            hand_in.names.add(name)
        try:
            hand_in.files.append((safe_path(inner), member))
        except ValueError as exc:
            hand_in.problems.append(f"{member.name}: {exc}")


def _canvas_anonymous(paths: list[PurePosixPath]) -> bool:
    """Whether a Canvas download is of an anonymous assignment: every name Canvas gave is ``anon_``'s.
    (Anonymity is the assignment's, not a file's: a student whose sortable name is ``anon`` does not
    make the others anonymous.)"""
    names = [p.as_posix() for p in paths if CANVAS_NAMED.match(p.as_posix()) or CANVAS_ANON.match(p.as_posix())]
    return bool(names) and all(CANVAS_ANON.match(n) for n in names)


def _plan(layout: str, members: list[tuple[PurePosixPath, Member]], assignment: str, prefix: str | None,
          report: Report) -> Plan:
    plan = Plan()
    if layout == "canvas":
        pattern = CANVAS_ANON if _canvas_anonymous([p for p, _ in members]) else CANVAS_NAMED
        for path, member in members:
            match = pattern.match(path.as_posix())
            if not match:
                report.skipped.append(f"{path} (not named as Canvas names a submission)")
                continue
            student = match["uid"]
            if match["late"]:
                plan.late.add(student)
            if match["file"] == STAMP:
                report.skipped.append(f"{path} ({STAMP} handed in by the student: the time is Canvas's)")
                continue
            plan.add(student, match["file"], member, report, name=match.groupdict().get("name"))
    elif layout == "moodle":
        for path, member in members:
            match = MOODLE.match(path.as_posix())
            if not match:
                report.skipped.append(f"{path} (not named as Moodle names a submission)")
                continue
            if match["plugin"] != "file":
                report.skipped.append(f"{path} (Moodle's {match['plugin']} submission, not a file)")
                continue
            if (match["inner"] or match["flat"]) == STAMP:
                report.skipped.append(f"{path} ({STAMP} handed in by the student: not a time Moodle gave)")
                continue
            plan.add(match["pid"], match["inner"] or match["flat"], member, report, name=match["name"])
    elif layout == "classroom":
        clones = sorted({path.parts[0] for path, _ in members if len(path.parts) > 1})
        if prefix is None:
            prefix = _shared_prefix(clones)
            if len(clones) == 1 and not prefix:
                report.skipped.append(f"(the repository prefix of one clone cannot be guessed: the student id is "
                                      f"the folder's whole name, {clones[0]}; give --prefix)")
        for path, member in members:
            parts = path.parts
            if len(parts) == 4 and parts[1] == "course" and parts[2] == assignment and parts[3].endswith(".ipynb"):
                clone = parts[0]
                student = clone[len(prefix):] if clone.startswith(prefix) and len(clone) > len(prefix) else clone
                plan.add(student, parts[3], member, report)
    else:
        for path, member in members:
            parts = path.parts
            if len(parts) >= 3 and parts[1] == assignment:
                plan.add(parts[0], "/".join(parts[2:]), member, report)
            elif len(parts) >= 3 and re.match(r"^\d\d_", parts[1]):
                continue  # another assignment's folder
            else:
                report.skipped.append(f"{path} (not in nbgrader's <student>/<assignment>/ layout)")
    return plan


def _shared_prefix(names: list[str]) -> str:
    """The longest prefix the clones' names share, up to and with its last hyphen ('' for one clone)."""
    if len(names) < 2:
        return ""
    common = os.path.commonprefix(names)
    return common[: common.rfind("-") + 1]


def _score(layout: str, paths: list[PurePosixPath], assignment: str) -> int:
    if layout == "canvas":
        return sum(len(p.parts) == 1 and bool(CANVAS_NAMED.match(p.as_posix()) or CANVAS_ANON.match(p.as_posix()))
                   for p in paths)
    if layout == "moodle":
        return sum(bool(MOODLE.match(p.as_posix())) for p in paths)
    if layout == "classroom":
        return sum(len(p.parts) == 4 and p.parts[1] == "course" and re.match(r"^\d\d_", p.parts[2]) is not None
                   for p in paths)
    return sum(len(p.parts) >= 3 and re.match(r"^\d\d_", p.parts[1]) is not None for p in paths)


def detect(paths: list[PurePosixPath], assignment: str) -> str | None:
    """The layout whose naming the most of ``paths`` follow; None when none does."""
    scores = {layout: _score(layout, paths, assignment) for layout in LAYOUTS}
    best = max(scores, key=lambda k: scores[k])
    return best if scores[best] else None


def _strip_top(members: list[tuple[PurePosixPath, Member]]) -> list[tuple[PurePosixPath, Member]]:
    """Members without the one top folder they all share (a zip of a folder), where they share one."""
    tops = {path.parts[0] for path, _ in members}
    if len(tops) == 1 and all(len(path.parts) > 1 for path, _ in members):
        return [(PurePosixPath(*path.parts[1:]), member) for path, member in members]
    return members


# -- what is wrong with a hand-in, before anything is written -----------------------------------------

def same_name_key(text: str) -> str:
    """``text`` as a disk may take it: Unicode NFC (macOS writes NFD) and case-folded (macOS and Windows
    disks ignore case). Two paths with one key would be one file on such a disk."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).casefold())


def check_hand_in(hand_in: HandIn, caps: Caps) -> list[str]:
    """What refuses this hand-in whole (empty: nothing): its paths' problems, one name given twice
    over, the same path more than once (every copy refused: which one the student meant is not the
    step's to guess), a path that is both a file and a folder, and the caps per file and per student,
    each with its flag and the figure."""
    problems = list(hand_in.problems)
    if len(hand_in.names) > 1:
        problems.append(f"the source gives this student {len(hand_in.names)} names: "
                        + ", ".join(repr(n) for n in sorted(hand_in.names)))
    copies: dict[str, list[str]] = {}
    folders: dict[str, str] = {}
    for path, member in hand_in.files:
        copies.setdefault(same_name_key(path.as_posix()), []).append(member.name)
        for depth in range(1, len(path.parts)):
            folder = PurePosixPath(*path.parts[:depth]).as_posix()
            folders.setdefault(same_name_key(folder), folder)
    for key, names in copies.items():
        if len(names) > 1:
            problems.append(f"{len(names)} files would be one ({', '.join(names)}): every copy refused")
        if key in folders:
            problems.append(f"{names[0]} is a file, and {folders[key]} a folder of other files: one name for both")
    if len(hand_in.files) > caps.student_files:
        problems.append(f"{len(hand_in.files)} files, over the cap of {caps.student_files} per student (--max-files)")
    for _, member in hand_in.files:
        if member.size > caps.file_bytes:
            problems.append(f"{member.name} declares {member.size} bytes, over the cap of {caps.file_bytes} per "
                            "file (--max-file-mb)")
    declared = sum(member.size for _, member in hand_in.files)
    if declared > caps.student_bytes:
        problems.append(f"its files declare {declared} bytes, over the cap of {caps.student_bytes} per student "
                        "(--max-student-mb)")
    return problems


def _case_twins(students: list[str]) -> dict[str, str]:
    """Student ids that differ from another only by case (one folder on a case-insensitive disk): id -> twin."""
    by_key: dict[str, list[str]] = {}
    for student in students:
        by_key.setdefault(same_name_key(student), []).append(student)
    return {s: next(t for t in group if t != s) for group in by_key.values() if len(group) > 1 for s in group}


# -- the step -------------------------------------------------------------------------------------

def resolve_assignment(name: str, known: list[str]) -> str:
    """The course's assignment named ``name`` or numbered ``name`` (``01`` or ``01_self_attention``).

    Raises:
        CollectError: the course has no such assignment.
    """
    found = [n for n in known if name in (n, n.split("_", 1)[0])]
    if len(found) != 1:
        raise CollectError(f"--assignment {name!r}: the course has {', '.join(known)}")
    return found[0]


def collect(source: Path, assignment: str, into: Path, layout: str | None = None, replace: bool = False,
            caps: Caps = Caps(), prefix: str | None = None,
            times: dict[tuple[str, str], tuple[dt.datetime, str]] | None = None) -> Report:
    """Unpacks ``source`` into ``into/<student_id>/<assignment>/``; what was done, skipped and refused.

    A student's hand-in is written whole or not at all (see :func:`_collect_hand_in`); one student's
    problem is that student's refusal, in ``report.refused_students``. Each collected hand-in's time
    is decided in the module docstring's order: ``times`` (``(student_id, assignment) -> (aware time,
    its source)``, from :func:`read_times` and :func:`read_worksheet_times`) first, then what the
    layout says.

    Raises:
        CollectError: the source is missing or not an archive or folder, no layout fits it, the hand-ins
            together are over a total cap, ``into`` (or the folder of ``students.csv`` and ``times.csv``)
            cannot be written, or nothing at all was collected (the report's lines are in the message).
    """
    if not source.exists():
        raise CollectError(f"{source} does not exist")
    report = Report(layout or "?", layout is None, assignment)
    with _members(source, report) as raw:
        members = []
        for member in raw:
            try:
                members.append((safe_path(member.name), member))
            except ValueError as exc:
                report.refused.append(f"{member.name} ({exc})")
        paths = [p for p, _ in members]
        if layout is None:
            layout = detect(paths, assignment)
            if layout is None:
                stripped = _strip_top(members)
                layout = detect([p for p, _ in stripped], assignment)
                members = stripped
            if layout is None:
                raise CollectError(f"{source}: no layout fits its {len(members)} files (canvas, moodle, classroom "
                                   "or nbgrader); see docs/instructors.md, 'Collecting submissions'")
        elif _score(layout, paths, assignment) == 0 and _score(layout, [p for p, _ in _strip_top(members)],
                                                               assignment):
            members = _strip_top(members)
        report.layout = layout
        plan = _plan(layout, members, assignment, prefix, report)
        _write(plan, into, assignment, replace, caps, report)
    report.names = {s: min(plan.hand_ins[s].names) for s in report.collected if plan.hand_ins[s].names}
    report.late = sorted(s for s in plan.late if s in report.collected)
    if report.names or report.late:
        _write_students(into.parent / STUDENTS_CSV, layout, report)
    if not report.collected:
        raise CollectError(f"nothing collected for {assignment} from {source}\n{report.summary()}")
    _record_times(into, assignment, layout, report, times or {})
    return report


def _record_times(into: Path, assignment: str, layout: str, report: Report,
                  given: dict[tuple[str, str], tuple[dt.datetime, str]]) -> None:
    """Each collected hand-in's time and its source into ``times.csv`` (and ``timestamp.txt``), in the
    module docstring's order: ``given`` (``--times``, Moodle's worksheet) first, then the layout's
    verdict without a time.

    Raises:
        CollectError: ``times.csv`` is not the one lms.times writes, or cannot be written.
    """
    verdicts = {}
    for student in report.collected:
        if layout == "canvas":
            verdicts[student, assignment] = CANVAS_LATE if student in report.late else CANVAS_ON_TIME
        elif layout == "moodle":
            verdicts[student, assignment] = MOODLE_NO_TIME
    if layout != "moodle" and any(source == WORKSHEET_SOURCE for _, source in given.values()):
        report.skipped.append(f"(--worksheet is Moodle's, its participants not {layout}'s ids: not used)")
        given = {key: found for key, found in given.items() if found[1] != WORKSHEET_SOURCE}
    timed = {key: found for key, found in given.items() if (into / key[0] / key[1]).is_dir()}
    try:
        if verdicts:
            rows = lms_times.sources(into)
            for (student, name), verdict in verdicts.items():
                rows[student, name] = {"student_id": student, "assignment": name, "submitted_at": "",
                                       "source": verdict}
            table = [lms_times.TIMES_HEADER, *[[row[k] for k in lms_times.TIMES_HEADER]
                                               for _, row in sorted(rows.items())]]
            atomic_write(lms_times.times_csv(into), csv_text(table))
        if timed:  # --times wins: written after the verdicts, over them
            lms_times.record(into, timed)
    except (OSError, ValueError) as exc:
        raise CollectError(f"{lms_times.times_csv(into)}: the hand-in times were not recorded: "
                           f"{getattr(exc, 'strerror', None) or exc} (the students' folders are written)\n"
                           f"{report.summary()}") from exc
    for key, verdict in verdicts.items():
        if key not in timed:
            report.times.setdefault(verdict, []).append(key[0])
    for (student, name), (_, source) in timed.items():
        report.times.setdefault(source, []).append(student if name == assignment else f"{student}/{name}")
    for source in sorted({source for _, source in given.values()}):
        rows = [key for key, (_, said) in given.items() if said == source]
        if missing := sorted(f"{s}/{a}" for s, a in rows if (s, a) not in timed):
            report.skipped.append(f"({source}: no hand-in collected for {len(missing)} of its rows: "
                                  f"{', '.join(missing[:20])}{' ...' if len(missing) > 20 else ''})")


def _table(path: Path, option: str, columns, expected: str):
    """The stripped header and a reader of the rest of the CSV file ``path`` given with ``option``.

    Raises:
        CollectError: the file cannot be read, or its header lacks one of ``columns`` (``expected`` says what
            was expected).
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CollectError(f"{option} {path}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from exc
    reader = csv.reader(text.splitlines())
    header = [h.strip() for h in next(reader, [])]
    if absent := [c for c in columns if c not in header]:
        raise CollectError(f"{option} {path}: no column {', '.join(absent)}{expected}")
    return header, reader


def read_times(path: Path, known: list[str]) -> dict[tuple[str, str], tuple[dt.datetime, str]]:
    """The hand-in times of ``--times FILE.csv`` and their source (``--times <file name>``): columns
    ``student_id,assignment,submitted_at`` (others ignored), a time in ISO 8601 with its offset
    (``2026-11-23T18:00:00+01:00``, or ``Z``), an assignment by its name or number (``01``); a UTF-8 BOM
    (Excel's) is allowed. Strict: every bad row is named.

    Raises:
        CollectError: the file cannot be read, lacks a column, or has bad rows: each with its line
            number and what was expected (a time without an offset, an unknown assignment, an empty or
            unsafe student id, the same hand-in twice).
    """
    header, reader = _table(path, "--times", TIMES_COLUMNS, f"; expected a header {','.join(TIMES_COLUMNS)} "
                            "(ISO 8601 times with their offset)")
    at = {c: header.index(c) for c in TIMES_COLUMNS}
    found: dict[tuple[str, str], tuple[dt.datetime, str]] = {}
    lines: dict[tuple[str, str], int] = {}
    bad = []
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        cells = {c: original(row[i].strip()) if i < len(row) else "" for c, i in at.items()}
        student, name, when = cells["student_id"], cells["assignment"], cells["submitted_at"]
        problems = []
        if not SAFE_ID.match(student):
            problems.append(f"student_id {student!r} is not a student id (letters, digits, . _ @ + -)")
        matches = [n for n in known if name in (n, n.split("_", 1)[0])]
        if len(matches) != 1:
            problems.append(f"assignment {name!r} is none of the course's ({', '.join(known)})")
        try:
            moment = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
            if moment.utcoffset() is None:
                problems.append(f"submitted_at {when!r} has no offset; expected e.g. {when}+01:00 or {when}Z")
        except ValueError:
            problems.append(f"submitted_at {when!r} is not ISO 8601; expected e.g. 2026-11-23T18:00:00+01:00")
        if not problems:
            key = (student, matches[0])
            if key in found:
                problems.append(f"{student}/{matches[0]} is on line {lines[key]} already")
            else:
                found[key], lines[key] = (moment, f"--times {path.name}"), line
        bad += [f"line {line}: {problem}" for problem in problems]
    if bad:
        shown = bad[:50] + ([f"... and {len(bad) - 50} more"] if len(bad) > 50 else [])
        raise CollectError(f"--times {path}: {len(bad)} bad row{'s' * (len(bad) != 1)}, nothing collected\n"
                           + "\n".join(f"  {b}" for b in shown))
    return found


# Moodle's userdate() with its default format (langconfig strftimedaydatetime, English: "%A, %d %B %Y,
# %I:%M %p", day and hour without their leading zero): "Monday, 23 November 2026, 5:59 PM".
MOODLE_DATE = re.compile(r"^\w+, (\d{1,2}) ([A-Za-z]+) (\d{4}), (\d{1,2}):(\d\d) ([AP]M)$")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WORKSHEET_SOURCE = "moodle worksheet: Last modified (submission)"


def read_worksheet_times(path: Path, zone: str, assignment: str) -> dict[tuple[str, str], tuple[dt.datetime, str]]:
    """Each participant's submission time from Moodle's grading worksheet (mod/assign gradingtable.php:
    ``Identifier`` = ``Participant <n>``, ``Last modified (submission)`` = ``userdate`` of the
    submission's ``timemodified``, in the time zone of the Moodle profile that downloaded it, to the
    minute; ``-`` where nothing was submitted). ``zone``: that time zone (a tz database name).

    Raises:
        CollectError: the file cannot be read, is not a worksheet, ``zone`` is no time zone, or a time is
            not in Moodle's English format (each such row named with its line).
    """
    try:
        where = zoneinfo.ZoneInfo(zone)
    except (ValueError, KeyError, OSError):
        raise CollectError(f"--worksheet-zone {zone!r}: not a time zone of the tz database; expected the zone "
                           "of the Moodle profile that downloaded the worksheet, e.g. Europe/Berlin") from None
    columns = ("Identifier", "Last modified (submission)")
    header, reader = _table(path, "--worksheet", columns, ": not Moodle's grading worksheet (View all submissions, "
                            "Download grading worksheet)")
    ids, at = (header.index(c) for c in columns)
    found, bad = {}, []
    for row in reader:
        participant = re.search(r"(\d+)\s*$", row[ids]) if ids < len(row) else None
        said = row[at].strip() if at < len(row) else ""
        if not participant or said in ("", "-"):
            continue
        match = MOODLE_DATE.match(said)
        if not match or match[2] not in MONTHS:
            bad.append(f"line {reader.line_num}: {said!r} is not Moodle's 'Monday, 23 November 2026, 5:59 PM' "
                       "(download the worksheet with the English language pack, or give --times)")
            continue
        day, month, year, hour, minute, half = match.groups()
        try:
            local = dt.datetime(int(year), MONTHS.index(month) + 1, int(day), int(hour) % 12 + 12 * (half == "PM"),
                                int(minute), tzinfo=where)
        except ValueError as exc:
            bad.append(f"line {reader.line_num}: {said!r}: {exc}")
            continue
        found[participant[1], assignment] = (local, WORKSHEET_SOURCE)
    if bad:
        raise CollectError(f"--worksheet {path}: {len(bad)} bad row{'s' * (len(bad) != 1)}, nothing collected\n"
                           + "\n".join(f"  {b}" for b in bad[:50]))
    return found


class Refusal(Exception):
    """One student's hand-in is not written: the message says why."""


# An error of these while writing is the destination's, not a student's: the step stops with one line.
DESTINATION_ERRNOS = {errno.EROFS, errno.ENOSPC, errno.EDQUOT}


def _into_fault(into: Path, exc: OSError, written: int = 0) -> CollectError:
    done = (f" ({written} student{'s' * (written != 1)} collected before it, each folder complete)"
            if written else " (nothing written)")
    return CollectError(f"--into {into}: cannot write there: {exc.strerror or exc}{done}")


def _write(plan: Plan, into: Path, assignment: str, replace: bool, caps: Caps, report: Report) -> None:
    """Checks every hand-in, then writes each accepted one through the per-student boundary.

    Raises:
        CollectError: the accepted hand-ins together are over a total cap (nothing written), or ``into``
            cannot be written (read-only, full, not a folder).
    """
    twins = _case_twins(list(plan.hand_ins))
    accepted: dict[str, HandIn] = {}
    for student, hand_in in sorted(plan.hand_ins.items()):
        problems = check_hand_in(hand_in, caps)
        if student in twins:
            problems.append(f"the student id differs from {twins[student]!r} only by case: one folder on a "
                            "case-insensitive disk")
        if problems:
            report.refuse(student, problems)
        elif hand_in.files:
            accepted[student] = hand_in
    files = sum(len(h.files) for h in accepted.values())
    declared = sum(m.size for h in accepted.values() for _, m in h.files)
    if files > caps.total_files:
        raise CollectError(f"the {len(accepted)} hand-ins to collect hold {files} files, over the cap of "
                           f"{caps.total_files} in all (--max-total-files); nothing written")
    if declared > caps.total_bytes:
        raise CollectError(f"the {len(accepted)} hand-ins to collect declare {declared} bytes, over the cap of "
                           f"{caps.total_bytes} in all (--max-mb); nothing written")
    if not accepted:
        return
    try:
        into.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".collect-", dir=into))
    except OSError as exc:
        raise _into_fault(into, exc) from exc
    budget = [caps.total_bytes]
    try:
        for student, hand_in in accepted.items():
            # The boundary of one student: whatever goes wrong with their hand-in (a collision the
            # disk sees, a damaged or inflating member, a name the disk refuses, any exception) is this
            # student's refusal, reported; their folder is complete or absent; the run goes on.
            try:
                report.collected[student] = _collect_hand_in(student, hand_in, into, staging, assignment, replace,
                                                             caps, budget)
            except Refusal as exc:
                report.refuse(student, [str(exc)])
            except OSError as exc:
                if exc.errno in DESTINATION_ERRNOS:
                    raise _into_fault(into, exc, len(report.collected)) from exc
                report.refuse(student, [f"not written: {type(exc).__name__}: {exc}"])
            except Exception as exc:  # noqa: BLE001 - the boundary: any error is this student's, never the run's
                first = str(exc).splitlines()[0][:300] if str(exc) else ""
                report.refuse(student, [f"not written: {type(exc).__name__}: {first}"])
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _collect_hand_in(student: str, hand_in: HandIn, into: Path, staging: Path, assignment: str, replace: bool,
                     caps: Caps, budget: list[int]) -> list[str]:
    """Writes one student's hand-in into ``staging``, then renames it to ``into/<student>/<assignment>``
    (a student's folder is complete or absent); the files written. ``budget`` is the bytes the run may
    still write, and is charged.

    Raises:
        Refusal: the folder is there already (without ``replace``), ``into/<student>`` is not a folder,
            or a member held more bytes than its cap once unpacked.
        OSError, zipfile.BadZipFile, tarfile.TarError, EOFError...: a member could not be read or written.
    """
    home = into / student
    final = home / assignment
    if home.is_symlink() or (home.exists() and not home.is_dir()):
        raise Refusal(f"in {into}, {student} is not a folder but a link or a file: not written")
    if (final.exists() or final.is_symlink()) and not replace:
        raise Refusal(f"{student}/{assignment} is already in {into}: not written (--replace to overwrite)")
    stage = staging / student
    stage.mkdir()
    try:
        written_bytes = 0
        for path, member in hand_in.files:
            target = stage / path
            target.parent.mkdir(parents=True, exist_ok=True)
            limit = min(caps.file_bytes, caps.student_bytes - written_bytes, budget[0])
            try:
                with member.open() as stream:
                    count = copy_capped(stream, target, limit)
            except OverflowError as exc:
                raise Refusal(f"{member.name}: {exc} (stopped while writing)") from exc
            written_bytes += count
            budget[0] -= count
            if member.mtime is not None:
                os.utime(target, (member.mtime, member.mtime))
        home.mkdir(exist_ok=True)
        if final.exists() or final.is_symlink():
            # --replace: the old folder is moved aside first, so that the new one arrives in one rename.
            old = staging / f".old-{student}"  # no student id starts with a dot
            os.replace(final, old)
            try:
                os.replace(stage, final)
            except BaseException:
                os.replace(old, final)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(stage, final)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return sorted(path.as_posix() for path, _ in hand_in.files)


STUDENTS_HEADER = ["student_id", "name", "lms", "late"]


def _write_students(path: Path, layout: str, report: Report) -> None:
    """Student id, name as the LMS gives it and Canvas's LATE flag, merged into ``path`` by student id,
    through the project's spreadsheet-safe writer (a name that starts with ``=`` stays text) and
    replaced in one rename.

    Raises:
        CollectError: the folder of ``path`` cannot be written (the students' folders are written already).
    """
    rows: dict[str, dict[str, str]] = {}
    header = STUDENTS_HEADER
    if path.is_file() and not path.is_symlink():
        with path.open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), None) or []
        # Columns after the first four are others' (`canvas times` adds login_id, sis_user_id): kept as they are.
        if header[:len(STUDENTS_HEADER)] != STUDENTS_HEADER or len(set(header)) != len(header):
            report.skipped.append(f"({path} is not one this step wrote: the names were not written to it)")
            return
        rows = {row["student_id"]: row for row in read_rows(path)}
    elif path.exists() or path.is_symlink():
        report.skipped.append(f"({path} is not a regular file: the names were not written to it)")
        return
    for student in report.collected:
        row = rows.get(student, {**dict.fromkeys(header, ""), "student_id": student, "lms": layout})
        row["name"] = report.names.get(student, row["name"])
        row["lms"] = layout
        late = set(filter(None, row["late"].split(" "))) - {report.assignment}
        if student in report.late:
            late.add(report.assignment)
        row["late"] = " ".join(sorted(late))
        rows[student] = row
    text = csv_text([header, *([rows[s].get(k) or "" for k in header] for s in sorted(rows))])
    try:
        fd, temporary = tempfile.mkstemp(prefix=".students-", suffix=".csv", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise CollectError(f"{path.parent}: {STUDENTS_CSV} not written: {exc.strerror or exc} (the students' "
                           f"folders are written)\n{report.summary()}") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="the LMS's download: a zip or tar, or a folder (of GitHub Classroom clones)")
    parser.add_argument("--assignment", required=True, metavar="NN",
                        help="the assignment these are submissions of (01 or 01_self_attention)")
    parser.add_argument("--into", required=True, metavar="SUBMITTED",
                        help="the folder `grade` reads: SUBMITTED/<student_id>/<assignment>/ are written")
    parser.add_argument("--layout", choices=LAYOUTS, default=None, help="the source's layout (default: detected)")
    parser.add_argument("--replace", action="store_true",
                        help="overwrite a student's folder of this assignment that is already there")
    caps = Caps()
    parser.add_argument("--max-mb", type=float, default=caps.total_bytes / (1 << 20), metavar="MIB",
                        help="the most that all the files together may unpack to, MiB (default %(default)g)")
    parser.add_argument("--max-student-mb", type=float, default=caps.student_bytes / (1 << 20), metavar="MIB",
                        help="the most that one student's files may unpack to, MiB (default %(default)g)")
    parser.add_argument("--max-file-mb", type=float, default=caps.file_bytes / (1 << 20), metavar="MIB",
                        help="the most that one file may unpack to, MiB (default %(default)g)")
    parser.add_argument("--max-files", type=int, default=caps.student_files, metavar="N",
                        help="the most files one student may hand in (default %(default)d)")
    parser.add_argument("--max-total-files", type=int, default=caps.total_files, metavar="N",
                        help="the most files all the students together may hand in (default %(default)d)")
    parser.add_argument("--times", default=None, metavar="FILE.csv",
                        help="hand-in times from any source: columns student_id,assignment,submitted_at (ISO 8601 "
                             "with its offset); they win over what the download says (see docs/lms-files.md)")
    parser.add_argument("--worksheet", default=None, metavar="WORKSHEET.csv",
                        help="moodle: the assignment's grading worksheet, whose Last modified (submission) gives each "
                             "hand-in's time (with --worksheet-zone); --times wins over it")
    parser.add_argument("--worksheet-zone", default=None, metavar="ZONE",
                        help="the time zone of the Moodle profile that downloaded --worksheet, e.g. Europe/Berlin")
    parser.add_argument("--prefix", default=None,
                        help="classroom: the clones' repository prefix before the username, e.g. transformers-01- "
                             "(default: the longest prefix their names share, up to a hyphen)")


def run(args: argparse.Namespace) -> int:
    """The ``collect`` command: 0 when something was collected, else 1 with a one-line error."""
    from transformer_course.layout import Repo

    mib = 1 << 20
    caps = Caps(file_bytes=int(args.max_file_mb * mib), student_bytes=int(args.max_student_mb * mib),
                student_files=args.max_files, total_bytes=int(args.max_mb * mib), total_files=args.max_total_files)
    try:
        known = [a.name for a in Repo().assignments()]
        assignment = resolve_assignment(args.assignment, known)
        times_path = Path(args.times).expanduser() if args.times else None
        given = {}  # read before anything is written: a bad row stops the step
        if args.worksheet:
            if not args.worksheet_zone:
                raise CollectError("--worksheet needs --worksheet-zone: its times are in the time zone of the Moodle "
                                   "profile that downloaded it (e.g. Europe/Berlin), and say none")
            given |= read_worksheet_times(Path(args.worksheet).expanduser(), args.worksheet_zone, assignment)
        if times_path:
            given |= read_times(times_path, known)  # --times wins
        report = collect(Path(args.source).expanduser().resolve(), assignment, Path(args.into).expanduser().resolve(),
                         layout=args.layout, replace=args.replace, caps=caps, prefix=args.prefix, times=given)
    except CollectError as exc:
        first, _, rest = str(exc).partition("\n")
        if rest:
            print(rest, file=sys.stderr)
        print(f"transformer-course collect: error: {first}", file=sys.stderr)
        return 1
    print(report.summary())
    if report.names or report.late:
        print(f"names: {Path(args.into).expanduser().resolve().parent / STUDENTS_CSV}")
    if report.times:
        print(f"hand-in times and their sources: {lms_times.times_csv(Path(args.into).expanduser())}")
    return 0
