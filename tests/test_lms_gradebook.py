"""lms fill-canvas / fill-moodle: the gradebook file an instructor downloaded from the LMS, with one
assignment's column filled from OUT/results.json and every other cell as the LMS wrote it."""

from __future__ import annotations

import codecs
import csv
import io
import json
import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transformer_course.cli import main
from transformer_course.lms.gradebook import GradebookError, fill_canvas, fill_moodle, moodle_folder, results

A, B = "01_self_attention", "02_scaled_dot_product"


def row(student, assignment=A, scores=(5.0, 6.0), maxima=(5.0, 6.0), **more):
    return {"student_id": student, "assignment": assignment, "status": "graded", "reason": "",
            "exercises": [{"exercise": f"e{i}", "score": s, "max_score": m, "feedback": ""}
                          for i, (s, m) in enumerate(zip(scores, maxima, strict=True))],
            "submitted_at": "", "late_by": 0.0, "late_penalty": 0.0, "late_note": "", "due": "",
            "manual_score": None, "manual_max_score": 0.0, "manual_status": "", **more}


@pytest.fixture
def out(tmp_path):
    """A graded OUT: results.json as `grade` writes it (final_score where the overrides' writer adds it)."""
    folder = tmp_path / "out"
    folder.mkdir()
    rows = [
        row("10001", manual_score=3.0, manual_max_score=4.0, manual_status="graded"),  # 11 + 3 in words
        row("10002", scores=(5.0, 4.0), late_penalty=2.0),  # 9 - 2 for lateness
        row("10003", manual_max_score=4.0, manual_status="awaiting"),  # in words not graded yet: not sent
        row("10004", scores=(0.0, 0.0), status="missing"),  # not handed in: Canvas's own cell kept
        row("10005", scores=(1.0, 0.0)),  # graded, not in the export
        row("10006", scores=(5.0, 6.0), final_score=10.5),  # an instructor's override (the grader's final_score)
        row("10007", scores=(5.0, 6.0)),  # excused in Canvas
        row("10001", assignment=B, scores=(1.0, 1.0)),
    ]
    (folder / "results.json").write_text(json.dumps(rows, indent=1))
    for student in ("10001", "10002", "301"):
        page = folder / "feedback" / student / A / f"{A}.html"
        page.parent.mkdir(parents=True)
        page.write_text(f"<html><body>feedback of {student}</body></html>")
    return folder


# Canvas's export (lib/gradebook_exporter.rb): names sortable, "=" escaped by Canvas, a comma in a name,
# an accented name, a Manual Posting row, the Points Possible row with its four spaces, Test Student.
CANVAS_EXPORT = (
    "Student,ID,SIS User ID,SIS Login ID,Section,01 Self-attention (1234),02 Scaled dot product (1235),"
    "Current Points,Final Points,Current Score,Unposted Current Score,Final Score,Unposted Final Score\n"
    ",,,,,Manual Posting,,,,,,,\n"
    "    Points Possible,,,,,15.00,2.00,(read only),(read only),(read only),(read only),(read only),(read only)\n"
    "\"Lovelace, Ada\",10001,s-1,ada@uni.edu,Section A,,2.00,2.00,2.00,100.00,100.00,11.76,11.76\n"
    "\"Müller, Jürgen\",10002,s-2,jm@uni.edu,Section A,1.00,,,,,,,\n"
    "\"Ngozi, Chiamaka\",10003,s-3,cn@uni.edu,Section B,,,,,,,,\n"
    "\"Hopper, Grace\",10004,s-4,gh@uni.edu,Section B,0.00,,,,,,,\n"
    "\"=\"\"=cmd|' /C calc'!A0\"\"\",10006,s-6,x@uni.edu,Section B,,,,,,,,\n"  # student_name: ="=..."
    "\"Turing, Alan\",10007,s-7,at@uni.edu,Section B,EX,,,,,,,\n"
    "\"Student, Test\",99999,,,Section A,,,,,,,,\n"
)


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8-sig").splitlines()


def test_canvas_export_keeps_its_header_with_one_column_filled(out, tmp_path, capsys):
    export, filled = tmp_path / "export.csv", tmp_path / "filled.csv"
    export.write_text(CANVAS_EXPORT, encoding="utf-8")
    assert main(["lms", "fill-canvas", str(out), "--gradebook", str(export), "--assignment", "01",
                 "-o", str(filled)]) == 0
    said = capsys.readouterr().out
    before, after = lines(export), lines(filled)
    assert after[:3] == before[:3]  # header, Manual Posting and Points Possible rows, byte for byte
    old = list(csv.reader(before))
    new = list(csv.reader(after))
    changed = {(r, c) for r in range(len(old)) for c in range(len(old[0])) if old[r][c] != new[r][c]}
    assert {c for _, c in changed} == {5}  # one column: "01 Self-attention (1234)"
    grade = {n[1]: n[5] for n in new[3:]}
    assert grade == {"10001": "14", "10002": "7", "10003": "", "10004": "0.00", "10006": "10.5", "10007": "EX",
                     "99999": ""}
    for unchanged in (3, 4, 5, 6, 7, 8):  # every student column as Canvas wrote it (quoted names included)
        assert new[unchanged][:5] == old[unchanged][:5]
    # the rows not filled stay byte for byte; Canvas's escaped "=" name as Canvas wrote it
    assert [after[i] for i in (5, 6, 8, 9)] == [before[i] for i in (5, 6, 8, 9)]
    assert after[7].startswith('"=""=cmd|\' /C calc\'!A0""",10006,s-6,x@uni.edu,Section B,10.5,')
    assert "column '01 Self-attention (1234)' filled for 3 students" in said
    assert "kept: 10003: its answers in words are not graded yet" in said
    assert "kept: 10004: not handed in" in said and "kept: 10007: excused in Canvas (EX): kept" in said
    assert "no grade in OUT: 99999" in said and "not in the file (not enrolled, or another section?): 10005" in said
    assert "Canvas's Points Possible for 01 Self-attention (1234) is 15.00, the notebook's 15" not in said


def test_canvas_semicolons_bom_crlf_and_decimal_commas_are_kept(out, tmp_path):
    text = ("Student;ID;SIS User ID;SIS Login ID;Section;Week 1 (77);01 Self-attention (1234)\r\n"
            "    Points Possible;;;;;10,00;12,00\r\n"
            "\"Lovelace; Ada\";10001;;ada;A;9,50;\r\n"
            "Müller, Jürgen;10002;;jm;A;;\r\n")
    export, filled = tmp_path / "export.csv", tmp_path / "filled.csv"
    export.write_bytes(codecs.BOM_UTF8 + text.encode())
    report = fill_canvas(out, export, "01_self_attention", filled)
    data = filled.read_bytes()
    assert data.startswith(codecs.BOM_UTF8) and data.count(b"\r\n") == 4
    assert data.decode("utf-8-sig").splitlines()[:2] == text.splitlines()[:2]
    assert data.decode("utf-8-sig").splitlines()[2:] == ['"Lovelace; Ada";10001;;ada;A;9,50;14',
                                                         "Müller, Jürgen;10002;;jm;A;;7"]
    assert report.filled == {"10001": "14", "10002": "7"}
    assert report.notes == ["Canvas's Points Possible for 01 Self-attention (1234) is 12,00, the notebook's 15: the "
                            "grades are the notebook's points; set the points in Canvas to match"]


def test_the_column_is_told_by_name_or_named_with_column(out, tmp_path):
    export, filled = tmp_path / "export.csv", tmp_path / "filled.csv"
    export.write_text("Student,ID,SIS User ID,SIS Login ID,Section,Week one (77),Self attention again (78)\n"
                      "\"Lovelace, Ada\",10001,,ada,A,,\n")
    with pytest.raises(GradebookError, match=r"matches 0 of the export's assignment columns \(Week one \(77\); "
                                             r"Self attention again \(78\)\); give the one to fill with --column"):
        fill_canvas(out, export, A, filled)
    assert not filled.exists()
    assert fill_canvas(out, export, A, filled, column="77").column == "Week one (77)"
    assert list(csv.reader(lines(filled)))[1][5:] == ["14", ""]
    export.write_text("Student,ID,SIS Login ID,Section,01 part one (5),01 part two (6)\n")
    with pytest.raises(GradebookError, match="matches 2 of"):
        fill_canvas(out, export, A, filled)


def test_files_that_are_not_the_lms_s_are_refused(out, tmp_path, capsys):
    other = tmp_path / "lms.csv"
    other.write_text("student_id,01_self_attention (11)\n10001,11\n")
    assert main(["lms", "fill-canvas", str(out), "--gradebook", str(other), "--assignment", "01",
                 "-o", str(tmp_path / "f.csv")]) == 1
    err = capsys.readouterr().err
    assert "no column ID, SIS Login ID, Section, Student: not Canvas's gradebook export" in err
    with pytest.raises(GradebookError, match="no column Identifier, Grade, Last modified \\(grade\\): not Moodle's"):
        fill_moodle(out, other, A, tmp_path / "f.csv")
    with pytest.raises(GradebookError, match="results.json not found: grade first"):
        results(tmp_path, A)
    with pytest.raises(GradebookError, match=f"--assignment '07': .* has {A}, {B}"):
        results(out, "07")
    (tmp_path / "latin1.csv").write_bytes("Student,ID\nM\xfcller,1\n".encode("latin-1"))
    with pytest.raises(GradebookError, match="not UTF-8 text"):
        fill_canvas(out, tmp_path / "latin1.csv", A, tmp_path / "f.csv")


# Moodle's grading worksheet (mod/assign/gradingtable.php, downloading): its columns in its order.
MOODLE_HEADER = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum grade",
                 "Grade can be changed", "Last modified (submission)", "Last modified (grade)", "Feedback comments"]


def worksheet(path: Path, rows: list[list[str]]) -> Path:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([MOODLE_HEADER, *rows])
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


def test_moodle_worksheet_and_feedback_files(out, tmp_path, capsys):
    (out / "results.json").write_text(json.dumps([
        row("301", manual_score=3.0, manual_max_score=4.0, manual_status="graded"),
        row("302", late_penalty=1.5), row("303"), row("304", scores=(9.0, 9.0), maxima=(9.0, 9.0))]))
    sheet = worksheet(tmp_path / "worksheet.csv", [
        ["Participant 301", "Zoë Ångström_Smith", "z@uni.edu", "Submitted for grading", "", "15.00", "Yes",
         "Monday, 23 November 2026, 5:59 PM", "-", ""],
        ["Participant 302", "Émile Zola", "e@uni.edu", "Submitted for grading - 2 hours late", "", "15.00", "Yes",
         "Monday, 23 November 2026, 8:00 PM", "-", ""],
        ["Participant 303", "Locked Out", "l@uni.edu", "Submitted for grading", "7.00", "15.00", "No",
         "Monday, 23 November 2026, 5:00 PM", "Tuesday, 24 November 2026, 9:00 AM", "kept"],
        ["Participant 304", "Over Max", "o@uni.edu", "Submitted for grading", "", "15.00", "Yes", "-", "-", ""],
        ["Participant 399", "No Handin", "n@uni.edu", "No submission", "", "15.00", "Yes", "-", "-", ""]])
    filled, zipped = tmp_path / "filled.csv", tmp_path / "feedback.zip"
    assert main(["lms", "fill-moodle", str(out), "--worksheet", str(sheet), "--assignment", A, "-o", str(filled),
                 "--feedback-zip", str(zipped)]) == 0
    said = capsys.readouterr().out
    old, new = list(csv.reader(lines(sheet))), list(csv.reader(lines(filled)))
    assert new[0] == MOODLE_HEADER
    changed = {c for r in range(len(old)) for c in range(len(MOODLE_HEADER)) if old[r][c] != new[r][c]}
    assert changed == {4, 9}  # Grade and Feedback comments; Last modified (grade) as Moodle wrote it
    assert [r[4] for r in new[1:]] == ["14", "9.5", "7.00", "18", ""]
    assert new[1][9] == f"{A}: 14 of 15 points; 11 autograded, 3 for the answers in words."
    assert new[2][9] == f"{A}: 9.5 of 11 points; 1.5 off for lateness."
    assert new[3][9] == "kept"
    assert "kept: 303: Grade can be changed: No" in said and "no grade in OUT: Participant 399" in said
    assert "304: 18 is over Moodle's Maximum grade 15.00" in said
    with zipfile.ZipFile(zipped) as archive:
        assert sorted(archive.namelist()) == [f"Zoë Ångström Smith_301_assignfeedback_file/{A}.html"]
        assert archive.read(archive.namelist()[0]) == b"<html><body>feedback of 301</body></html>"
    # Moodle's importer (importziplib.php) splits the folder at "_" into 5: the participant id is the second part
    assert moodle_folder("A_B/C", "7").split("_", 4)[1:] == ["7", "assignfeedback", "file"]


CELL = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@given(cells=st.lists(st.tuples(CELL, CELL, CELL), min_size=1, max_size=4), delimiter=st.sampled_from([",", ";"]),
       bom=st.booleans())
def test_any_cell_of_the_export_comes_back_as_it_was(cells, delimiter, bom):
    """Names, logins and sections with quotes, delimiters, line breaks, formulas: read and written back
    unchanged; only the assignment's column of the students in OUT changes."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        out = root / "out"
        out.mkdir()
        (out / "results.json").write_text(json.dumps([row(str(10001 + i)) for i in range(len(cells))]))
        rows = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"{A} (9)"],
                ["    Points Possible", "", "", "", "", "11"]]
        rows += [[name, str(10001 + i), "", login, section, ""] for i, (name, login, section) in enumerate(cells)]
        buffer = io.StringIO()
        for line in rows:  # as Canvas's Ruby CSV writes them: a cell with a line break quoted
            csv.writer(buffer, delimiter=delimiter, lineterminator="\n",
                       quoting=csv.QUOTE_ALL if any("\r" in c for c in line) else csv.QUOTE_MINIMAL).writerow(line)
        (root / "e.csv").write_bytes((codecs.BOM_UTF8 if bom else b"") + buffer.getvalue().encode())
        fill_canvas(out, root / "e.csv", A, root / "f.csv")
        text = (root / "f.csv").read_bytes()
        assert text.startswith(codecs.BOM_UTF8) == bom
        back = list(csv.reader(io.StringIO(text.decode("utf-8-sig"), newline=""), delimiter=delimiter))
        assert [r[:5] for r in back] == [r[:5] for r in rows]
        assert [r[5] for r in back] == [f"{A} (9)", "11", *["11"] * len(cells)]
