"""``transformer-course collect``: an LMS's download of submissions, unpacked into nbgrader's layout.

The grader never unpacks an archive; this step does, explicitly, and writes
``SUBMITTED/<student_id>/<assignment>/<the student's files>``, which ``transformer-course grade`` reads.

The layouts (``--layout``, else detected from the names in the source):

``canvas``
    Canvas's "Download Submissions" zip: one flat file per attachment, named by Canvas's
    ``ContentZipper`` (instructure/canvas-lms, lib/content_zipper.rb, ``get_filename`` and
    ``add_upload_submission``): ``<sortable name, lower case, letters and digits only>[_LATE]_<user
    id>_<attachment id>_<file name as handed in>``; an anonymous assignment has ``anon_<anonymous id>``
    for the name and the user id. A resubmitted file keeps the name Canvas gave it (``01_x-1.ipynb``).
    The student id is the user id; only the prefix is stripped from the file's name. ``LATE`` is
    Canvas's flag, not a time: it goes to ``students.csv``, and no ``timestamp.txt`` is written.
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

Safety: nothing but regular files is written. Symbolic and hard links are skipped, special files
(devices, fifos) refused, a path that is absolute, has ``..`` or a drive letter is refused; the
declared size of each member and of them all is checked against the caps before anything is
written, and the bytes written are counted while writing (a member that inflates past its
declared size is stopped). Written files are ``rw-r--r--`` whatever the archive says. Each skipped
or refused member is reported once, at the end.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import re
import shutil
import stat
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

LAYOUTS = ("canvas", "moodle", "classroom", "nbgrader")
STUDENTS_CSV = "students.csv"
CHUNK = 1 << 16
# Canvas: [name_][LATE_]<user id>_<attachment id>_<file>; anonymous: [LATE_]anon_<id>_<attachment id>_<file>.
# The name never holds "_<digits>_" (Canvas removes it), so the first such match is the id.
CANVAS = re.compile(r"^(?:(?P<name>[^/]*?)_)??(?P<late>LATE_)?(?P<uid>\d+|anon_[A-Za-z0-9]+)_(?P<fid>\d+)_"
                    r"(?P<file>[^/]+)$")
# Moodle: <name>_<participant id>_assignsubmission_<plugin>[_]/<path> or ..._assignsubmission_<plugin>_<file>.
MOODLE = re.compile(r"^(?P<name>[^/_]*)_(?P<pid>\d+)_assignsubmission_(?P<plugin>[a-z0-9]+)"
                    r"(?:_?/(?P<inner>.+)|_(?P<flat>[^/]+))$")
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

    def summary(self) -> str:
        how = "detected" if self.detected else "as asked"
        lines = [f"layout: {self.layout} ({how})"]
        if self.collected:
            lines.append(f"collected {len(self.collected)} student{'s' * (len(self.collected) != 1)} for "
                         f"{self.assignment}: " + ", ".join(f"{s} ({len(f)} file{'s' * (len(f) != 1)})"
                                                             for s, f in sorted(self.collected.items())))
        if self.late:
            lines.append(f"marked LATE by Canvas (a flag, not a time: no timestamp.txt written): "
                         f"{', '.join(sorted(self.late))}")
        if self.skipped or self.refused:
            lines.append(f"{len(self.skipped)} skipped, {len(self.refused)} refused:")
            lines += [f"  skipped: {line}" for line in self.skipped]
            lines += [f"  refused: {line}" for line in self.refused]
        return "\n".join(lines)


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


# -- what goes where: (student, path in the assignment folder, member) --------------------------------

@dataclass
class Plan:
    files: list[tuple[str, PurePosixPath, Member]] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    late: set[str] = field(default_factory=set)


def _plan(layout: str, members: list[tuple[PurePosixPath, Member]], assignment: str, prefix: str | None,
          report: Report) -> Plan:
    plan = Plan()
    if layout == "canvas":
        for path, member in members:
            match = CANVAS.match(path.as_posix())
            if not match:
                report.skipped.append(f"{path} (not named as Canvas names a submission)")
                continue
            student = match["uid"]
            if match["name"]:
                plan.names[student] = match["name"]
            if match["late"]:
                plan.late.add(student)
            plan.files.append((student, PurePosixPath(match["file"]), member))
    elif layout == "moodle":
        for path, member in members:
            match = MOODLE.match(path.as_posix())
            if not match:
                report.skipped.append(f"{path} (not named as Moodle names a submission)")
                continue
            if match["plugin"] != "file":
                report.skipped.append(f"{path} (Moodle's {match['plugin']} submission, not a file)")
                continue
            plan.names[match["pid"]] = match["name"]
            plan.files.append((match["pid"], PurePosixPath(match["inner"] or match["flat"]), member))
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
                plan.files.append((student, PurePosixPath(parts[3]), member))
    else:
        for path, member in members:
            parts = path.parts
            if len(parts) >= 3 and parts[1] == assignment:
                plan.files.append((parts[0], PurePosixPath(*parts[2:]), member))
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
        return sum(len(p.parts) == 1 and bool(CANVAS.match(p.as_posix())) for p in paths)
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
            max_bytes: int = 200 << 20, max_member_bytes: int = 50 << 20, prefix: str | None = None) -> Report:
    """Unpacks ``source`` into ``into/<student_id>/<assignment>/``; what was done, skipped and refused.

    Raises:
        CollectError: the source is missing or not an archive or folder, no layout fits it, or nothing
            at all was collected (the report's lines are in the message).
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
        _write(plan, into, assignment, replace, max_bytes, max_member_bytes, report)
    report.names = {s: n for s, n in plan.names.items() if s in report.collected}
    report.late = sorted(s for s in plan.late if s in report.collected)
    if report.names or report.late:
        _write_students(into.parent / STUDENTS_CSV, layout, report)
    if not report.collected:
        raise CollectError(f"nothing collected for {assignment} from {source}\n{report.summary()}")
    return report


def _write(plan: Plan, into: Path, assignment: str, replace: bool, max_bytes: int, max_member_bytes: int,
           report: Report) -> None:
    by_student: dict[str, list[tuple[PurePosixPath, Member]]] = {}
    for student, path, member in plan.files:
        if not SAFE_ID.match(student):
            report.refused.append(f"{member.name} (student id {student!r} is not a safe folder name)")
            continue
        by_student.setdefault(student, []).append((path, member))
    # Declared sizes first: a source over the caps is refused before anything is written.
    declared = 0
    for student, files in by_student.items():
        kept = []
        for path, member in files:
            if member.size > max_member_bytes:
                report.refused.append(f"{member.name} (declares {member.size} bytes, over the cap of "
                                      f"{max_member_bytes} per file)")
            else:
                kept.append((path, member))
                declared += member.size
        by_student[student] = kept
    if declared > max_bytes:
        raise CollectError(f"the files to collect declare {declared} bytes, over the cap of {max_bytes} "
                           "(--max-mb)")
    into.mkdir(parents=True, exist_ok=True)
    total = 0
    with tempfile.TemporaryDirectory(prefix=".collect-", dir=into) as tmp:
        for student, files in sorted(by_student.items()):
            final = into / student / assignment
            if not files:
                continue
            if (into / student).is_symlink() or (into / student).exists() and not (into / student).is_dir():
                report.refused.append(f"{student} (in {into}, not a folder but a link or a file: not written)")
                continue
            if final.exists() or final.is_symlink():
                if not replace:
                    report.refused.append(f"{student}/{assignment} (already in {into}; --replace to overwrite)")
                    continue
            stage = Path(tmp) / student / assignment
            written = []
            for path, member in files:
                target = stage / path
                if target.exists():
                    report.refused.append(f"{member.name} (a second file named {path} for {student})")
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with member.open() as stream:
                        total += copy_capped(stream, target, min(max_member_bytes, max_bytes - total))
                except OverflowError as exc:
                    report.refused.append(f"{member.name} ({exc}: stopped while writing)")
                    continue
                except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as exc:
                    target.unlink(missing_ok=True)
                    report.refused.append(f"{member.name} (damaged: {type(exc).__name__}: {exc})")
                    continue
                if member.mtime is not None:
                    os.utime(target, (member.mtime, member.mtime))
                written.append(path.as_posix())
            if not written:
                continue
            if final.exists() or final.is_symlink():
                if final.is_dir() and not final.is_symlink():
                    shutil.rmtree(final)
                else:
                    final.unlink()
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage, final)
            report.collected[student] = sorted(written)


def _write_students(path: Path, layout: str, report: Report) -> None:
    """Student id, name as the LMS gives it and Canvas's LATE flag, merged into ``path`` by student id."""
    header = ["student_id", "name", "lms", "late"]
    rows: dict[str, dict[str, str]] = {}
    if path.is_file() and not path.is_symlink():
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames != header:
                report.skipped.append(f"({path} is not one this step wrote: the names were not written to it)")
                return
            rows = {row["student_id"]: row for row in reader}
    elif path.exists() or path.is_symlink():
        report.skipped.append(f"({path} is not a regular file: the names were not written to it)")
        return
    for student in report.collected:
        row = rows.get(student, {"student_id": student, "name": "", "lms": layout, "late": ""})
        row["name"] = report.names.get(student, row["name"])
        row["lms"] = layout
        late = set(filter(None, row["late"].split(" "))) - {report.assignment}
        if student in report.late:
            late.add(report.assignment)
        row["late"] = " ".join(sorted(late))
        rows[student] = row
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, header)
        writer.writeheader()
        writer.writerows(rows[s] for s in sorted(rows))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="the LMS's download: a zip or tar, or a folder (of GitHub Classroom clones)")
    parser.add_argument("--assignment", required=True, metavar="NN",
                        help="the assignment these are submissions of (01 or 01_self_attention)")
    parser.add_argument("--into", required=True, metavar="SUBMITTED",
                        help="the folder `grade` reads: SUBMITTED/<student_id>/<assignment>/ are written")
    parser.add_argument("--layout", choices=LAYOUTS, default=None, help="the source's layout (default: detected)")
    parser.add_argument("--replace", action="store_true",
                        help="overwrite a student's folder of this assignment that is already there")
    parser.add_argument("--max-mb", type=float, default=200.0, metavar="MIB",
                        help="the most that all the files together may unpack to, MiB (default 200)")
    parser.add_argument("--max-file-mb", type=float, default=50.0, metavar="MIB",
                        help="the most that one file may unpack to, MiB (default 50)")
    parser.add_argument("--prefix", default=None,
                        help="classroom: the clones' repository prefix before the username, e.g. transformers-01- "
                             "(default: the longest prefix their names share, up to a hyphen)")


def run(args: argparse.Namespace) -> int:
    """The ``collect`` command: 0 when something was collected, else 1 with a one-line error."""
    from transformer_course.layout import Repo

    try:
        assignment = resolve_assignment(args.assignment, [a.name for a in Repo().assignments()])
        report = collect(Path(args.source).expanduser().resolve(), assignment, Path(args.into).expanduser().resolve(),
                         layout=args.layout, replace=args.replace, max_bytes=int(args.max_mb * (1 << 20)),
                         max_member_bytes=int(args.max_file_mb * (1 << 20)), prefix=args.prefix)
    except CollectError as exc:
        first, _, rest = str(exc).partition("\n")
        if rest:
            print(rest, file=sys.stderr)
        print(f"transformer-course collect: error: {first}", file=sys.stderr)
        return 1
    print(report.summary())
    if report.names or report.late:
        print(f"names: {Path(args.into).expanduser().resolve().parent / STUDENTS_CSV}")
    return 0
