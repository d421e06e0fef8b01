"""Grades back into an LMS without its API: the gradebook file the instructor downloaded, filled.

``transformer-course lms fill-canvas OUT --gradebook EXPORT.csv --assignment NAME -o FILLED.csv`` and
``transformer-course lms fill-moodle OUT --worksheet WORKSHEET.csv --assignment NAME -o FILLED.csv
[--feedback-zip FEEDBACK.zip]``: one assignment's column filled with each student's grade from
``OUT/results.json`` (written by ``transformer-course grade``), every other byte of the file kept as the LMS
wrote it (its delimiter, its BOM, its line ends, its other rows and columns), so that the LMS's import
takes it back and changes that one column only.

The grade of a hand-in is its ``final_score`` (the autograded points after any instructor override, less
the late penalty) plus its ``manual_score`` (the answers in words, graded by hand). A hand-in whose
answers in words are not graded yet, one not handed in (``missing``) and one the grader failed on keep
the LMS's cell as it was, and are listed: an LMS takes a cell as a grade, and a part of a grade would be
a wrong one.

Canvas
    The export is Canvas's "Export Entire Gradebook" (instructure/canvas-lms, lib/gradebook_exporter.rb,
    ``csv_data``): a header ``Student`` (or ``LastName``, ``FirstName``), ``ID``, ``SIS User ID``,
    ``SIS Login ID``, [``Integration ID``, ``Root Account``], ``Section``, custom columns, then one column
    per assignment named ``<title> (<assignment id>)`` (``title_with_id``), then read-only totals; a row
    of ``Manual Posting`` markers where an assignment's grades are posted by hand, and the ``    Points
    Possible`` row (four spaces, as Canvas writes it); then one row per student, ``ID`` being Canvas's
    user id, the course's student id (``collect`` takes it from the download's file names). The user's
    CSV settings may make the delimiter ``;`` and add a BOM (``CSVWithI18n``); numbers are written with
    at most 2 decimals (``format_numbers``), with the decimal mark the file's own numbers use. An excused
    student (``EX``) keeps ``EX``. Canvas's import ("How do I import grades in the Gradebook?", Canvas
    Instructor Guide) matches students by these columns and assignments by the ``(id)`` in the column's
    name: a column it does not know would become a new assignment, so none is added.
Moodle
    The worksheet is the assignment's "Download grading worksheet" (mod/assign/gradingtable.php, the
    table's download columns): ``Identifier`` (``Participant <n>``, the participant id ``collect`` takes
    from the download's folder names), ``Full name``, the identity fields (``Email address``),
    ``Status``, ``Grade``, ``Maximum grade``, ``Grade can be changed``, ``Last modified (submission)``,
    ``Last modified (grade)``, ``Feedback comments`` (when the comments feedback type is on). Its import
    (mod/assign/feedback/offline/importgradeslib.php) needs ``Identifier``, ``Grade`` and ``Last modified
    (grade)``, and takes the feedback plugins' columns by their names: ``Grade`` and ``Feedback
    comments`` are filled, ``Last modified (grade)`` is kept (the import compares it). A row whose grade
    cannot be changed (``Grade can be changed`` = No) is kept. ``--feedback-zip``: each filled student's
    feedback pages in the zip Moodle's "Upload multiple feedback files in a zip" takes
    (mod/assign/feedback/file/importziplib.php, ``is_valid_filename_for_import``): one folder per
    student, ``<full name>_<participant id>_assignfeedback_file/<page>.html`` (no ``_`` in the name:
    Moodle splits there).
"""

from __future__ import annotations

import argparse
import codecs
import csv
import io
import json
import re
import sys
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from transformer_course.grading.output.atomic import atomic_write
from transformer_course.grading.output.spreadsheet import safe_cell

CANVAS_STUDENT_COLUMNS = ("ID", "SIS Login ID", "Section")  # every export has these (and Student, or its halves)
CANVAS_ASSIGNMENT = re.compile(r"^(?P<title>.*\S)\s*\((?P<id>\d+)\)$")
POINTS_POSSIBLE = "Points Possible"
MOODLE_REQUIRED = ("Identifier", "Grade", "Last modified (grade)")  # importgradeslib.php's init()
MOODLE_COMMENTS = "Feedback comments"
MOODLE_PARTICIPANT = re.compile(r"(\d+)\s*$")  # "Participant 12" ("hiddenuser" is translated: the digits count)
NOT_FILLED = {"missing": "not handed in", "grader-error": "the grader failed on it: grade it again first"}


class GradebookError(Exception):
    """The file or the run cannot be filled: the message says why and what was expected, in one line."""


@dataclass(frozen=True)
class Grade:
    """One student's grade of one assignment, from ``results.json``."""

    student_id: str
    final_score: float  # autograded, after overrides, less the late penalty
    manual_score: float | None  # answers in words; None: not graded by hand (or none)
    max_score: float  # autograded and in words
    late_penalty: float
    status: str
    awaiting: bool  # answers in words not graded yet

    @property
    def points(self) -> float:
        return self.final_score + (self.manual_score or 0.0)

    def comment(self, assignment: str) -> str:
        """The feedback comment of the grade, in words."""
        parts = [f"{assignment}: {self.points:g} of {self.max_score:g} points"]
        if self.manual_score is not None:
            parts.append(f"{self.final_score:g} autograded, {self.manual_score:g} for the answers in words")
        if self.late_penalty:
            parts.append(f"{self.late_penalty:g} off for lateness")
        return "; ".join(parts) + "."


def results(out: Path, assignment: str) -> tuple[str, dict[str, Grade]]:
    """The assignment's name and each student's grade, from ``OUT/results.json``. ``assignment`` is a name
    or a number (``01``).

    Raises:
        GradebookError: no results.json (OUT not graded), one that is not the grader's, or no such
            assignment in it.
    """
    path = out / "results.json"
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GradebookError(f"{path} not found: grade first (transformer-course grade SUBMITTED --out {out})"
                             ) from None
    except (OSError, ValueError) as exc:
        raise GradebookError(f"{path} cannot be read: {exc}") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"student_id", "assignment"} <= set(r)
                                             for r in rows):
        raise GradebookError(f"{path} is not the grader's results.json (a list of rows with student_id, assignment)")
    names = sorted({str(r["assignment"]) for r in rows})
    found = [n for n in names if assignment in (n, n.split("_", 1)[0])]
    if len(found) != 1:
        raise GradebookError(f"--assignment {assignment!r}: {path} has {', '.join(names) or 'no assignment'}")
    grades = {}
    for r in rows:
        if r["assignment"] != found[0]:
            continue
        try:
            exercises = r.get("exercises") or []
            score = sum(float(e.get("score", 0)) for e in exercises)
            penalty = float(r.get("late_penalty") or 0)
            final = float(r["final_score"]) if r.get("final_score") is not None else max(0.0, score - penalty)
            manual = r.get("manual_score")
            grades[str(r["student_id"])] = Grade(
                str(r["student_id"]), final, None if manual is None else float(manual),
                sum(float(e.get("max_score", 0)) for e in exercises) + float(r.get("manual_max_score") or 0),
                penalty, str(r.get("status", "")), r.get("manual_status") == "awaiting")
        except (TypeError, ValueError, AttributeError) as exc:
            raise GradebookError(f"{path}: the row of {r['student_id']!r} {found[0]} holds a score that is not a "
                                 f"number ({exc}): not the grader's results.json; grade again") from None
    return found[0], grades


@dataclass
class Filled:
    """What a fill did: the column, the students filled (id -> cell), those kept and why, those unmatched."""

    column: str
    filled: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)  # student id -> why their cell was left as it was
    unmatched: list[str] = field(default_factory=list)  # rows of the file with no grade in OUT
    absent: list[str] = field(default_factory=list)  # graded in OUT, not in the file
    notes: list[str] = field(default_factory=list)

    def summary(self, target: Path) -> str:
        lines = [f"{target}: column {self.column!r} filled for {len(self.filled)} student"
                 f"{'s' * (len(self.filled) != 1)}; every other cell as the LMS wrote it"]
        lines += [f"  kept: {s}: {why}" for s, why in sorted(self.kept.items())]
        if self.unmatched:
            lines.append(f"  left as they were, no grade in OUT: {', '.join(self.unmatched)}")
        if self.absent:
            lines.append(f"  graded, but not in the file (not enrolled, or another section?): {', '.join(self.absent)}")
        lines += [f"  note: {n}" for n in self.notes]
        # names and ids come from the file: a control character is shown, not sent to the terminal
        return "\n".join("".join(c if unicodedata.category(c)[0] != "C" else ascii(c)[1:-1] for c in line)
                         for line in lines)


# -- the file as the LMS wrote it ------------------------------------------------------------------------

@dataclass
class Sheet:
    """A CSV file's rows and how it was written (delimiter, BOM, line end), to write it back the same way."""

    rows: list[list[str]]
    delimiter: str
    bom: bool
    newline: str

    @classmethod
    def read(cls, path: Path, option: str) -> Sheet:
        """Raises: GradebookError: the file cannot be read, is not UTF-8 text, or is empty."""
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise GradebookError(f"{option} {path}: cannot be read: {exc.strerror or exc}") from None
        bom = data.startswith(codecs.BOM_UTF8)
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise GradebookError(f"{option} {path}: not UTF-8 text; download it again from the LMS as CSV, "
                                 "unchanged") from None
        first = text.split("\n", 1)[0]
        try:
            delimiter = csv.Sniffer().sniff(first, delimiters=",;\t").delimiter
        except csv.Error:
            delimiter = ","
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
        if not rows:
            raise GradebookError(f"{option} {path}: empty")
        return cls(rows, delimiter, bom, "\r\n" if "\r\n" in text else "\n")

    def write(self, path: Path) -> None:
        buffer = io.StringIO()
        plain = csv.writer(buffer, delimiter=self.delimiter, lineterminator=self.newline)
        # the csv module quotes a cell holding a character of its line end only: a bare "\r" in a cell of
        # a file of "\n" lines would end the row there for a reader (as spreadsheet.csv_text does)
        quoted = csv.writer(buffer, delimiter=self.delimiter, lineterminator=self.newline, quoting=csv.QUOTE_ALL)
        for row in self.rows:
            (quoted if any("\r" in cell for cell in row) else plain).writerow(row)
        atomic_write(path, (codecs.BOM_UTF8 if self.bom else b"") + buffer.getvalue().encode("utf-8"))


def _decimal_mark(cells: list[str]) -> str:
    """The decimal mark the file's own numbers use ("," where one reads ``7,5``; else ".")."""
    return "," if any(re.fullmatch(r"-?\d+,\d+", c.strip()) for c in cells) else "."


def _number(value: float, mark: str) -> str:
    """``value`` with at most 2 decimals (Canvas's precision, and Moodle's default), in the file's decimal mark."""
    text = f"{round(value, 2):.2f}".rstrip("0").rstrip(".")
    return safe_cell(text.replace(".", mark))


def _cell(row: list[str], index: int) -> str:
    return row[index].strip() if index < len(row) else ""


def _set(row: list[str], index: int, value: str) -> None:
    row.extend([""] * (index + 1 - len(row)))
    row[index] = value


def _why_kept(grade: Grade) -> str:
    if grade.status in NOT_FILLED:
        return NOT_FILLED[grade.status]
    if grade.awaiting:
        return ("its answers in words are not graded yet (formgrader; then `grade` or `report`): a part of a "
                "grade is not sent")
    return ""


# -- Canvas ----------------------------------------------------------------------------------------------

def canvas_column(header: list[str], assignment: str, column: str | None) -> int:
    """The index of the assignment's column in Canvas's export: the one ``--column`` names (its header,
    title or Canvas id), else the one whose title is the assignment's name or starts with its number
    (``01 Self-attention``), ignoring case and punctuation.

    Raises:
        GradebookError: none or several match (the message lists the export's assignment columns).
    """
    columns = {i: m for i, h in enumerate(header) if (m := CANVAS_ASSIGNMENT.match(h.strip()))}
    if column is not None:
        found = [i for i, m in columns.items() if column.strip() in (header[i].strip(), m["title"], m["id"])]
    else:
        def key(text: str) -> str:
            return re.sub(r"[\W_]+", "_", text.casefold()).strip("_")

        number = assignment.split("_", 1)[0]
        found = [i for i, m in columns.items()
                 if key(m["title"]) == key(assignment) or re.match(rf"{number}(_|$)", key(m["title"]))]
    if len(found) != 1:
        listed = "; ".join(header[i] for i in columns) or "none"
        how = f"--column {column!r} names" if column is not None else f"the name of {assignment} matches"
        raise GradebookError(f"{how} {len(found)} of the export's assignment columns ({listed}); give the one to "
                             "fill with --column, e.g. --column \"01 Self-attention (1234)\"")
    return found[0]


def fill_canvas(out: Path, export: Path, assignment: str, target: Path, column: str | None = None) -> Filled:
    """Canvas's exported gradebook with the assignment's column filled (see the module docstring).

    Raises:
        GradebookError: OUT has no results for the assignment, the file is not Canvas's export (its
            student columns are missing), the column cannot be told, or ``target`` cannot be written.
    """
    name, grades = results(out, assignment)
    sheet = Sheet.read(export, "--gradebook")
    header = [h.strip() for h in sheet.rows[0]]
    if missing := [c for c in CANVAS_STUDENT_COLUMNS if c not in header] + (
            [] if "Student" in header or "LastName" in header else ["Student"]):
        raise GradebookError(f"--gradebook {export}: no column {', '.join(missing)}: not Canvas's gradebook export "
                             "(Grades, Export, Export Entire Gradebook: Student, ID, SIS User ID, SIS Login ID, "
                             "Section, then the assignments)")
    at, ids = canvas_column(sheet.rows[0], name, column), header.index("ID")
    filled = Filled(sheet.rows[0][at].strip())
    students = [row for row in sheet.rows[1:] if _cell(row, ids)]
    possible = next((row for row in sheet.rows[1:] if _cell(row, 0) == POINTS_POSSIBLE), None)
    mark = _decimal_mark([c for row in sheet.rows[1:] for c in row[header.index("Section") + 1:]])
    for row in students:
        student = _cell(row, ids)
        grade = grades.get(student)
        if grade is None:
            filled.unmatched.append(student)
        elif _cell(row, at) == "EX":
            filled.kept[student] = "excused in Canvas (EX): kept"
        elif why := _why_kept(grade):
            filled.kept[student] = why
        else:
            _set(row, at, cell := _number(grade.points, mark))
            filled.filled[student] = cell
    seen = {_cell(row, ids) for row in students}
    filled.absent = sorted(s for s, g in grades.items() if s not in seen and g.status not in NOT_FILLED)
    if possible is not None and grades:
        top = max(g.max_score for g in grades.values())
        said = _cell(possible, at)
        try:
            canvas_points = float(said.replace(",", "."))
        except ValueError:
            canvas_points = None
        if canvas_points is not None and abs(canvas_points - top) > 1e-9:
            filled.notes.append(f"Canvas's Points Possible for {filled.column} is {said}, the notebook's {top:g}: "
                                "the grades are the notebook's points; set the points in Canvas to match")
    _write(sheet, target)
    return filled


# -- Moodle ----------------------------------------------------------------------------------------------

def fill_moodle(out: Path, worksheet: Path, assignment: str, target: Path, feedback_zip: Path | None = None) -> Filled:
    """Moodle's grading worksheet with ``Grade`` and ``Feedback comments`` filled, and, with
    ``feedback_zip``, the filled students' feedback pages as Moodle's feedback-files zip (see the module
    docstring).

    Raises:
        GradebookError: OUT has no results for the assignment, the file is not Moodle's grading worksheet
            (``Identifier``, ``Grade`` or ``Last modified (grade)`` missing), or a file cannot be written.
    """
    name, grades = results(out, assignment)
    sheet = Sheet.read(worksheet, "--worksheet")
    header = [h.strip() for h in sheet.rows[0]]
    if missing := [c for c in MOODLE_REQUIRED if c not in header]:
        raise GradebookError(f"--worksheet {worksheet}: no column {', '.join(missing)}: not Moodle's grading "
                             "worksheet (the assignment's View all submissions, Grading action: Download grading "
                             "worksheet)")
    ids, at = header.index("Identifier"), header.index("Grade")
    comments = header.index(MOODLE_COMMENTS) if MOODLE_COMMENTS in header else None
    changeable = header.index("Grade can be changed") if "Grade can be changed" in header else None
    maximum = header.index("Maximum grade") if "Maximum grade" in header else None
    full_name = header.index("Full name") if "Full name" in header else None
    filled = Filled("Grade" + (f" and {MOODLE_COMMENTS}" if comments is not None else ""))
    if comments is None:
        filled.notes.append(f"no {MOODLE_COMMENTS!r} column (the comments feedback type is off in the assignment's "
                            "settings): grades only")
    mark = _decimal_mark([_cell(row, maximum) for row in sheet.rows[1:]] if maximum is not None else [])
    names: dict[str, str] = {}
    seen = set()
    for row in sheet.rows[1:]:
        match = MOODLE_PARTICIPANT.search(_cell(row, ids))
        if not match:
            continue
        student = match[1]
        seen.add(student)
        grade = grades.get(student)
        if grade is None:
            filled.unmatched.append(_cell(row, ids))
            continue
        if changeable is not None and _cell(row, changeable) not in ("", "Yes"):
            filled.kept[student] = f"Grade can be changed: {_cell(row, changeable)} (locked or released in Moodle)"
            continue
        if why := _why_kept(grade):
            filled.kept[student] = why
            continue
        _set(row, at, cell := _number(grade.points, mark))
        if comments is not None:
            _set(row, comments, safe_cell(grade.comment(name)))
        if maximum is not None and _cell(row, maximum):
            try:
                top = float(_cell(row, maximum).replace(",", "."))
            except ValueError:
                top = None
            if top is not None and grade.points > top + 1e-9:
                filled.notes.append(f"{student}: {cell} is over Moodle's Maximum grade {_cell(row, maximum)}: "
                                    "Moodle's import refuses it; set the assignment's maximum to the notebook's")
        filled.filled[student] = cell
        names[student] = _cell(row, full_name) if full_name is not None else ""
    filled.absent = sorted(s for s, g in grades.items() if s not in seen and g.status not in NOT_FILLED)
    _write(sheet, target)
    if feedback_zip is not None:
        count = _feedback_zip(out, name, names, feedback_zip)
        filled.notes.append(f"{feedback_zip}: {count} feedback page{'s' * (count != 1)} for Moodle's \"Upload "
                            "multiple feedback files in a zip\"")
    return filled


def moodle_folder(full_name: str, participant: str) -> str:
    """The folder Moodle's feedback-files import reads a participant's files from:
    ``<full name>_<participant id>_assignfeedback_file`` (Moodle splits the name at ``_``: none is left in it)."""
    clean = re.sub(r'[\x00-\x1f\x7f/\\:*?"<>|]', "", full_name.replace("_", " ")).strip() or "Participant"
    return f"{clean}_{participant}_assignfeedback_file"


def _feedback_zip(out: Path, assignment: str, names: dict[str, str], target: Path) -> int:
    """The feedback pages of the students filled (``OUT/feedback/<student>/<assignment>/*.html``) in
    Moodle's feedback-files layout, written in one rename; the pages written.

    Raises:
        GradebookError: ``target`` cannot be written.
    """
    buffer, count = io.BytesIO(), 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for student, full_name in sorted(names.items()):
            folder = out / "feedback" / student / assignment
            for page in sorted(folder.glob("*.html")) if folder.is_dir() else []:
                if page.is_file() and not page.is_symlink():
                    archive.write(page, f"{moodle_folder(full_name, student)}/{page.name}")
                    count += 1
    try:
        atomic_write(target, buffer.getvalue())
    except OSError as exc:
        raise GradebookError(f"--feedback-zip {target}: cannot be written: {exc.strerror or exc}") from None
    return count


def _write(sheet: Sheet, target: Path) -> None:
    try:
        sheet.write(target)
    except OSError as exc:
        raise GradebookError(f"-o {target}: cannot be written: {exc.strerror or exc}") from None


# -- the command -----------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``lms``'s subcommands: fill-canvas and fill-moodle."""
    sub = parser.add_subparsers(dest="lms_command", required=True)
    p = sub.add_parser("fill-canvas", help="fill one assignment's column of Canvas's exported gradebook CSV")
    p.add_argument("out", help="the --out folder of `transformer-course grade`")
    p.add_argument("--gradebook", required=True, metavar="EXPORT.csv",
                   help="Canvas's Grades > Export > Export Entire Gradebook, as downloaded")
    p.add_argument("--assignment", required=True, metavar="NAME",
                   help="the course's assignment (01 or 01_self_attention)")
    p.add_argument("--column", default=None, metavar="TITLE",
                   help="the export's column to fill, where its title does not name the assignment: "
                        "\"Week 1 (1234)\", its title or its id")
    p.add_argument("-o", "--output", required=True, metavar="FILLED.csv", help="the filled file, to import in Canvas")
    p = sub.add_parser("fill-moodle", help="fill Moodle's grading worksheet (and its feedback-files zip)")
    p.add_argument("out", help="the --out folder of `transformer-course grade`")
    p.add_argument("--worksheet", required=True, metavar="WORKSHEET.csv",
                   help="the assignment's Download grading worksheet, as downloaded")
    p.add_argument("--assignment", required=True, metavar="NAME",
                   help="the course's assignment (01 or 01_self_attention)")
    p.add_argument("-o", "--output", required=True, metavar="FILLED.csv",
                   help="the filled worksheet, for Upload grading worksheet")
    p.add_argument("--feedback-zip", default=None, metavar="FILE.zip",
                   help="also write the feedback pages as the zip of Moodle's Upload multiple feedback files in a zip")


def run(args: argparse.Namespace) -> int:
    """The ``lms`` command: 0 when the file was written, else 1 with a one-line error."""
    try:
        out, target = Path(args.out).expanduser(), Path(args.output).expanduser()
        if args.lms_command == "fill-canvas":
            filled = fill_canvas(out, Path(args.gradebook).expanduser(), args.assignment, target, args.column)
        else:
            zipped = Path(args.feedback_zip).expanduser() if args.feedback_zip else None
            filled = fill_moodle(out, Path(args.worksheet).expanduser(), args.assignment, target, zipped)
    except GradebookError as exc:
        print(f"transformer-course lms {args.lms_command}: error: {exc}", file=sys.stderr)
        return 1
    print(filled.summary(target))
    return 0
