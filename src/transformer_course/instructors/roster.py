"""Students' names beside their ids: in the run's table, the report, the feedback pages and the similarity pages.

Where a name comes from, first found:

1. ``--roster FILE.csv`` (``grade``, ``report``, ``similarity``): columns ``student_id`` and ``name``, read by
   name (other columns are left alone);
2. ``students.csv`` beside the folder of hand-ins (``collect`` writes it: ``student_id,name,lms,late``, and the
   LMS's ``login_id,sis_user_id`` where it knows them), for ``grade``;
3. ``OUT/roster.csv``, which ``grade`` keeps from 1 or 2, for ``report`` and ``similarity``.

No name known: the id alone. A name is what an LMS or a student typed, so hostile: it is shown
:func:`cleaned` (no control or bidirectional-formatting character, whitespace collapsed, at most
:data:`MAX_NAME` characters), escaped on a page and isolated there in ``<bdi>`` (a right-to-left name
does not reorder the id beside it), and written to CSV through the spreadsheet-safe writer.
"""

from __future__ import annotations

import csv
import html
import sys
import unicodedata
from pathlib import Path

from transformer_course.grading.output.atomic import atomic_write
from transformer_course.grading.output.spreadsheet import csv_text, read_rows

STUDENTS_CSV = "students.csv"  # collect's, beside SUBMITTED
KEPT = "roster.csv"  # in OUT: the names of the last `grade`
MAX_NAME = 60  # characters shown of a name: a longer one is cut (a name is not an essay)
# Format characters kept: the joiners some scripts and emoji need (ZWNJ, ZWJ); every other one (the
# bidirectional overrides, isolates and marks, invisible separators) is dropped.
JOINERS = {"\u200c", "\u200d"}


class RosterError(ValueError):
    """A roster file that cannot be read or lacks its columns (refused before any grading starts)."""


def cleaned(name: str, limit: int = MAX_NAME) -> str:
    """``name`` as it may be shown anywhere: control, format (bidirectional overrides included, joiners
    kept), surrogate, private-use and unassigned characters dropped, any run of whitespace one space, cut to
    ``limit`` characters with ``...``."""
    kept = "".join(" " if c.isspace() else c for c in name
                   if c in JOINERS or c.isspace() or unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Co", "Cn"))
    kept = " ".join(kept.split())
    return kept if len(kept) <= limit else kept[: limit - 3].rstrip() + "..."


def read(path: Path) -> dict[str, str]:
    """``student_id -> name`` from a CSV with (at least) those two columns, by name; a row without a name
    is left out; the first row of an id wins.

    Raises:
        RosterError: the file cannot be read, or has no ``student_id`` or ``name`` column.
    """
    try:
        # the header's cells by name, a spreadsheet's byte-order mark aside (Excel writes one)
        rows = [{(k or "").lstrip("\ufeff").strip(): v for k, v in row.items()} for row in read_rows(path)]
        with open(path, newline="", encoding="utf-8-sig") as f:
            header = [c.strip() for c in next(csv.reader(f), [])]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RosterError(f"{path} cannot be read as a CSV ({type(exc).__name__}); expected the columns "
                          "student_id,name") from None
    if missing := [c for c in ("student_id", "name") if c not in header]:
        raise RosterError(f"{path}: no {' or '.join(missing)} column; expected a header with student_id and name "
                          "(e.g. student_id,name)")
    names: dict[str, str] = {}
    for row in rows:
        student, name = (row.get("student_id") or "").strip(), cleaned(row.get("name") or "")
        if student and name:
            names.setdefault(student, name)
    return names


def for_run(submitted: Path | None = None, roster: Path | None = None, out: Path | None = None) -> dict[str, str]:
    """The names of a run: ``roster`` (``--roster``), else ``students.csv`` beside ``submitted``, else those
    ``OUT/roster.csv`` kept; {} where there is none. A ``students.csv`` that cannot be read gives no names
    and a warning on stderr (it is collect's, and the ids are enough to grade); a ``--roster`` that cannot be
    read is an error.

    Raises:
        RosterError: ``roster`` cannot be read or lacks its columns.
    """
    if roster is not None:
        if not Path(roster).is_file():
            raise RosterError(f"roster {roster} not found; expected a CSV with the columns student_id,name")
        return read(Path(roster))
    for path in ([Path(submitted).parent / STUDENTS_CSV] if submitted is not None else []) + (
            [Path(out) / KEPT] if out is not None else []):
        if path.is_file():
            try:
                return read(path)
            except RosterError as exc:
                print(f"warning: {exc}: no names are shown, the ids alone (--roster FILE.csv gives them)",
                      file=sys.stderr)
                return {}
    return {}


def keep(out: Path, names: dict[str, str]) -> None:
    """Write ``OUT/roster.csv`` (``student_id,name``), what ``report`` and ``similarity`` read; none where there
    are no names (an earlier run's is removed: the ids alone, as the run said)."""
    path = Path(out) / KEPT
    if not names:
        path.unlink(missing_ok=True)
        return
    atomic_write(path, csv_text([["student_id", "name"], *sorted(names.items())]))


def label(student: str, names: dict[str, str]) -> str:
    """``Ada Lovelace (10001)``, or the id alone where no name is known (text: escape it on a page)."""
    name = names.get(student)
    return f"{name} ({student})" if name else student


def label_html(student: str, names: dict[str, str]) -> str:
    """:func:`label` for a page: escaped, the name isolated in ``<bdi>``."""
    name = names.get(student)
    return f"<bdi>{html.escape(name)}</bdi> ({html.escape(student)})" if name else html.escape(student)


def name_html(student: str, names: dict[str, str]) -> str:
    """The name alone for a table's name column (escaped, isolated); "" where none is known."""
    name = names.get(student)
    return f"<bdi>{html.escape(name)}</bdi>" if name else ""


def sort_key(student: str, names: dict[str, str]) -> tuple[int, str, str]:
    """Students by name (case and accents aside), those without one after, by id."""
    name = names.get(student, "")
    folded = unicodedata.normalize("NFKD", name.casefold())
    return (0 if name else 1, "".join(c for c in folded if not unicodedata.combining(c)), student)


# Click a column's heading to sort by it (again: the other way round). Inline and self-contained: the
# pages are opened from disk, offline. Sorts by a cell's data-sort where it has one (numbers), else its text.
SORTABLE = """<script>
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.style.cursor = "pointer"; th.title = "sort by this column";
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0], i = th.cellIndex, up = th.dataset.up !== "1";
    th.dataset.up = up ? "1" : "0";
    var key = function (row) { var c = row.cells[i]; return c ? (c.dataset.sort || c.textContent) : ""; };
    Array.from(body.rows).sort(function (a, b) {
      return key(a).localeCompare(key(b), undefined, {numeric: true}) * (up ? 1 : -1);
    }).forEach(function (row) { body.appendChild(row); });
  });
});
</script>"""

HEADING = ("<!-- course: student -->", "<!-- /course: student -->")


def heading_on_page(page: Path, student: str, names: dict[str, str]) -> None:
    """Put the student's name and id at the top of their feedback page (replacing what an earlier run put
    there; nothing where no name is known, as before names). Never puts the name in unescaped."""
    if not page.is_file():
        return
    text = original = page.read_text()
    start, end = text.find(HEADING[0]), text.find(HEADING[1])
    if start >= 0 and end > start:
        text = text[:start] + text[end + len(HEADING[1]):]
    if names.get(student):
        shown = (f'{HEADING[0]}<p style="font-family:sans-serif;font-size:1.2em;margin:.5em 0">'
                 f"{label_html(student, names)}</p>{HEADING[1]}")
        at = text.find(">", text.find("<body")) + 1 if "<body" in text else 0
        text = text[:at] + shown + text[at:]
    if text != original:
        atomic_write(page, text)
