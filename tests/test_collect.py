"""`transformer-course collect`: an LMS's download unpacked into nbgrader's layout, and nothing else:
no link, no special file, no path out of the destination, no more bytes than the caps allow."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import stat
import struct
import tarfile
import tempfile
import zipfile
import zoneinfo
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transformer_course.cli import main
from transformer_course.instructors.collect import (
    CANVAS_LATE,
    CANVAS_ON_TIME,
    MOODLE_NO_TIME,
    Caps,
    CollectError,
    collect,
    copy_capped,
    detect,
    read_times,
    read_worksheet_times,
    safe_path,
)
from transformer_course.instructors.deadlines import submitted_at
from transformer_course.lms import times

from .conftest import GRADING_TIMEOUT

A = "01_self_attention"
NOTEBOOK = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def write_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def add_tar(archive: tarfile.TarFile, name: str, data: bytes = b"", **attrs) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 1_700_000_000
    for key, value in attrs.items():
        setattr(info, key, value)
    archive.addfile(info, io.BytesIO(data) if info.isfile() else None)


@pytest.fixture
def canvas_zip(tmp_path):
    return write_zip(tmp_path / "submissions.zip", {
        f"lovelaceada_12345_67890_{A}.ipynb": NOTEBOOK,
        f"turingalan_LATE_23456_78901_{A}-1.ipynb": NOTEBOOK + b" ",
        "turingalan_LATE_23456_78902_notes.txt": b"late notes",
    })


def test_canvas(canvas_zip, tmp_path, capsys):
    into = tmp_path / "class" / "submitted"
    assert main(["collect", str(canvas_zip), "--assignment", "01", "--into", str(into)]) == 0
    out = capsys.readouterr().out
    assert "layout: canvas (detected)" in out
    # the student id is Canvas's user id; the file keeps its name, only Canvas's prefix stripped
    assert files_under(into) == {f"12345/{A}/{A}.ipynb", f"23456/{A}/{A}-1.ipynb", f"23456/{A}/notes.txt"}
    assert (into / "23456" / A / f"{A}-1.ipynb").read_bytes() == NOTEBOOK + b" "
    assert not list(into.rglob("timestamp.txt"))  # LATE is a flag, not a time
    assert "LATE" in out and "23456" in out
    with (into.parent / "students.csv").open() as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert rows["12345"]["name"] == "lovelaceada" and rows["12345"]["late"] == ""
    assert rows["23456"]["name"] == "turingalan" and rows["23456"]["late"] == A
    assert all(not stat.S_IMODE(p.stat().st_mode) & 0o111 for p in into.rglob("*") if p.is_file())


def test_canvas_anonymous_and_existing_folder(tmp_path):
    source = write_zip(tmp_path / "anon.zip", {f"LATE_anon_ab12C_555_{A}.ipynb": NOTEBOOK,
                                               f"anon_xy9_556_{A}.ipynb": NOTEBOOK})
    into = tmp_path / "submitted"
    report = collect(source, A, into)
    assert set(report.collected) == {"anon_ab12C", "anon_xy9"}
    (into / "anon_xy9" / A / f"{A}.ipynb").write_bytes(b"graded already")
    with pytest.raises(CollectError, match=r"(?s)nothing collected.*anon_xy9/01_self_attention .*--replace"):
        collect(source, A, into, layout="canvas")
    assert (into / "anon_xy9" / A / f"{A}.ipynb").read_bytes() == b"graded already"
    collect(source, A, into, replace=True)
    assert (into / "anon_xy9" / A / f"{A}.ipynb").read_bytes() == NOTEBOOK
    assert not any(p.name.startswith(".collect-") for p in into.iterdir())


def test_moodle(tmp_path):
    source = write_zip(tmp_path / "moodle.zip", {
        f"Ada Lovelace_1001_assignsubmission_file_/{A}.ipynb": NOTEBOOK,
        "Alan Turing_1002_assignsubmission_file/sub/helper.py": b"x = 1",
        f"Alan Turing_1002_assignsubmission_file/{A}.ipynb": NOTEBOOK,
        f"Grace Hopper_1003_assignsubmission_file_{A}.ipynb": NOTEBOOK,  # before Moodle 3.1: flat
        "Grace Hopper_1003_assignsubmission_onlinetext_/onlinetext.html": b"<p>hi</p>",
    })
    into = tmp_path / "submitted"
    report = collect(source, A, into)
    assert report.layout == "moodle" and report.detected
    assert files_under(into) == {f"1001/{A}/{A}.ipynb", f"1002/{A}/{A}.ipynb", f"1002/{A}/sub/helper.py",
                                 f"1003/{A}/{A}.ipynb"}
    assert any("onlinetext" in line for line in report.skipped)
    with (tmp_path / "students.csv").open() as handle:
        assert {r["student_id"]: r["name"] for r in csv.DictReader(handle)} == {
            "1001": "Ada Lovelace", "1002": "Alan Turing", "1003": "Grace Hopper"}


def test_columns_others_added_to_students_csv_are_kept(tmp_path):
    """`canvas times` adds login_id and sis_user_id after collect's four columns: a later collect keeps them."""
    source = write_zip(tmp_path / "moodle.zip", {f"Ada Lovelace_1001_assignsubmission_file_/{A}.ipynb": NOTEBOOK,
                                                 f"Alan Turing_1002_assignsubmission_file_/{A}.ipynb": NOTEBOOK})
    (tmp_path / "students.csv").write_text("student_id,name,lms,late,login_id,sis_user_id\n"
                                           "1001,Ada L.,moodle,,ada,S-1\n")
    collect(source, A, tmp_path / "submitted")
    with (tmp_path / "students.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert rows == [{"student_id": "1001", "name": "Ada Lovelace", "lms": "moodle", "late": "", "login_id": "ada",
                     "sis_user_id": "S-1"},
                    {"student_id": "1002", "name": "Alan Turing", "lms": "moodle", "late": "", "login_id": "",
                     "sis_user_id": ""}]


def test_classroom(tmp_path):
    clones = tmp_path / "clones"
    for user in ("ada-l", "alan"):
        folder = clones / f"transformers-01-{user}" / "course" / A
        folder.mkdir(parents=True)
        (folder / f"{A}.ipynb").write_bytes(NOTEBOOK + user.encode())
        (folder / "course_blocks.py").write_text("# shipped, not the student's")
    (clones / "transformers-01-ada-l" / ".git" / "objects").mkdir(parents=True)
    (clones / "transformers-01-ada-l" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    other = clones / "transformers-01-alan" / "course" / "02_scaled_dot_product"
    other.mkdir(parents=True)
    (other / "02_scaled_dot_product.ipynb").write_bytes(NOTEBOOK)
    into = tmp_path / "submitted"
    report = collect(clones, A, into)
    assert report.layout == "classroom"
    assert files_under(into) == {f"ada-l/{A}/{A}.ipynb", f"alan/{A}/{A}.ipynb"}
    assert (into / "ada-l" / A / f"{A}.ipynb").read_bytes() == NOTEBOOK + b"ada-l"
    # one clone: the prefix cannot be guessed, so it is given
    single = tmp_path / "one"
    (single / "transformers-01-bob" / "course" / A).mkdir(parents=True)
    (single / "transformers-01-bob" / "course" / A / f"{A}.ipynb").write_bytes(NOTEBOOK)
    assert set(collect(single, A, tmp_path / "s2", prefix="transformers-01-").collected) == {"bob"}


def test_tar_links_escapes_and_special_files(tmp_path):
    source = tmp_path / "class.tar.gz"
    with tarfile.open(source, "w:gz") as archive:
        add_tar(archive, f"submitted/s1/{A}/{A}.ipynb", NOTEBOOK, mode=0o4777)
        add_tar(archive, f"submitted/s1/{A}/timestamp.txt", b"2026-12-01 10:00:00+00:00")
        add_tar(archive, f"submitted/s1/{A}/link.ipynb", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        add_tar(archive, f"submitted/s1/{A}/hard.ipynb", type=tarfile.LNKTYPE,
                linkname=f"submitted/s1/{A}/{A}.ipynb")
        add_tar(archive, f"submitted/s1/{A}/pipe", type=tarfile.FIFOTYPE)
        add_tar(archive, f"submitted/s1/{A}/null", type=tarfile.CHRTYPE, devmajor=1, devminor=3)
        add_tar(archive, f"../escape/{A}/{A}.ipynb", NOTEBOOK)
        add_tar(archive, f"/tmp/abs/{A}/{A}.ipynb", NOTEBOOK)
        add_tar(archive, f"submitted/s2/{A}/../../../../evil.ipynb", NOTEBOOK)
    into = tmp_path / "out" / "submitted"
    report = collect(source, A, into)
    assert report.layout == "nbgrader"
    assert files_under(tmp_path / "out") == {f"submitted/s1/{A}/{A}.ipynb", f"submitted/s1/{A}/timestamp.txt"}
    assert set(files_under(tmp_path)) == {"class.tar.gz", f"out/submitted/s1/{A}/{A}.ipynb",
                                          f"out/submitted/s1/{A}/timestamp.txt"}
    assert stat.S_IMODE((into / "s1" / A / f"{A}.ipynb").stat().st_mode) == 0o644
    assert (into / "s1" / A / "timestamp.txt").read_text().startswith("2026-12-01")
    skipped, refused = "\n".join(report.skipped), "\n".join(report.refused)
    assert "link.ipynb (a symbolic link" in skipped and "hard.ipynb (a hard link" in skipped
    assert "pipe (a special file: a fifo)" in refused and "null (a special file: a character device)" in refused
    assert "../escape" in refused and "/tmp/abs" in refused and "evil.ipynb" in refused
    assert not Path(f"/tmp/abs/{A}").exists()
    summary = report.summary()
    assert "2 skipped, 5 refused:" in summary


def test_zip_symlink_and_windows_paths(tmp_path):
    source = tmp_path / "nb.zip"
    with zipfile.ZipFile(source, "w") as archive:
        archive.writestr(f"s1/{A}/{A}.ipynb", NOTEBOOK)
        link = zipfile.ZipInfo(f"s1/{A}/link.ipynb")
        link.create_system = 3
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
        fifo = zipfile.ZipInfo(f"s1/{A}/fifo")
        fifo.create_system = 3
        fifo.external_attr = (stat.S_IFIFO | 0o644) << 16
        archive.writestr(fifo, "")
        archive.writestr(f"C:/s2/{A}/{A}.ipynb", NOTEBOOK)
        archive.writestr(f"s3\\..\\..\\{A}\\{A}.ipynb", NOTEBOOK)
    into = tmp_path / "submitted"
    report = collect(source, A, into, layout="nbgrader")
    assert files_under(into) == {f"s1/{A}/{A}.ipynb"}
    assert any("link.ipynb (a symbolic link)" in line for line in report.skipped)
    assert any("fifo (a special file" in line for line in report.refused)
    assert any(line.startswith("C:/s2") and "absolute" in line for line in report.refused)
    assert any("'..'" in line for line in report.refused)


def test_safe_path():
    assert safe_path("a/./b//c.ipynb").as_posix() == "a/b/c.ipynb"
    for bad in ("/etc/passwd", "../x", "a/../../x", "C:\\x", "d:x", "a\\..\\..\\x", "", "./"):
        with pytest.raises(ValueError):
            safe_path(bad)


def test_zip_bomb_declared_size(tmp_path):
    """A highly compressible member over the per-file cap is refused from its declared size, before
    any of it is written, and with it its student's whole hand-in (a folder is complete or absent);
    all the members together over --max-mb stop the step before writing."""
    source = write_zip(tmp_path / "bomb.zip", {f"s1/{A}/{A}.ipynb": NOTEBOOK, f"s1/{A}/zeros.bin": bytes(3 << 20),
                                               f"s2/{A}/{A}.ipynb": NOTEBOOK})
    assert source.stat().st_size < 20_000
    into = tmp_path / "submitted"
    report = collect(source, A, into, caps=Caps(file_bytes=1 << 20))
    assert files_under(into) == {f"s2/{A}/{A}.ipynb"}
    assert report.refused_students == {"s1": [
        f"s1/{A}/zeros.bin declares 3145728 bytes, over the cap of 1048576 per file (--max-file-mb)"]}
    with pytest.raises(CollectError, match=rf"declare {(3 << 20) + 2 * len(NOTEBOOK)} bytes, over the cap of "
                       r"2097152 in all \(--max-mb\); nothing written"):
        collect(source, A, tmp_path / "other", caps=Caps(total_bytes=2 << 20))
    assert not (tmp_path / "other").exists()


def test_zip_bomb_that_lies(tmp_path):
    """A member whose headers declare 100 bytes but that inflates to 8 MiB: stopped while writing, and
    its student refused whole."""
    source = write_zip(tmp_path / "liar.zip", {f"s1/{A}/{A}.ipynb": NOTEBOOK, f"s1/{A}/zeros.bin": bytes(8 << 20),
                                               f"s2/{A}/{A}.ipynb": NOTEBOOK})
    data = bytearray(source.read_bytes())
    patched = 0
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            name_at = start + (30 if signature == b"PK\x03\x04" else 46)
            if data[name_at:name_at + 12] == f"s1/{A}"[:12].encode() and b"zeros.bin" in data[name_at:name_at + 60]:
                struct.pack_into("<I", data, start + offset, 100)
                patched += 1
            start += 4
    assert patched == 2
    source.write_bytes(bytes(data))
    assert zipfile.ZipFile(source).getinfo(f"s1/{A}/zeros.bin").file_size == 100
    into = tmp_path / "submitted"
    report = collect(source, A, into, caps=Caps(file_bytes=1 << 20, total_bytes=2 << 20))
    assert files_under(into) == {f"s2/{A}/{A}.ipynb"}
    # Python's zipfile stops at the declared size (its CRC then fails); copy_capped's own count is the
    # second guard (test_copy_capped_counts_what_it_writes)
    [reason] = report.refused_students["s1"]
    assert "BadZipFile" in reason or "over the cap" in reason
    assert sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file()) < 1 << 20
    assert not any(p.name.startswith(".collect-") for p in into.iterdir())


def test_copy_capped_counts_what_it_writes(tmp_path):
    """The cap holds against the bytes themselves, whatever was declared."""
    target = tmp_path / "out.bin"
    with pytest.raises(OverflowError):
        copy_capped(io.BytesIO(bytes(1000)), target, 999)
    assert not target.exists()
    assert copy_capped(io.BytesIO(bytes(1000)), target, 1000) == 1000
    assert target.stat().st_size == 1000


def test_fifo_in_a_folder_is_refused(tmp_path):
    source = tmp_path / "plain"
    (source / "s1" / A).mkdir(parents=True)
    (source / "s1" / A / f"{A}.ipynb").write_bytes(NOTEBOOK)
    os.mkfifo(source / "s1" / A / "pipe")
    (source / "s1" / A / "link").symlink_to("/etc/passwd")
    report = collect(source, A, tmp_path / "submitted")
    assert files_under(tmp_path / "submitted") == {f"s1/{A}/{A}.ipynb"}
    assert any("pipe (a special file" in line for line in report.refused)
    assert any("link (a symbolic link)" in line for line in report.skipped)


def test_detect():
    from pathlib import PurePosixPath as P

    assert detect([P(f"smith_1_2_{A}.ipynb")], A) == "canvas"
    assert detect([P(f"J Smith_7_assignsubmission_file/{A}.ipynb")], A) == "moodle"
    assert detect([P(f"hw-jsmith/course/{A}/{A}.ipynb")], A) == "classroom"
    assert detect([P(f"jsmith/{A}/{A}.ipynb")], A) == "nbgrader"
    assert detect([P("readme.txt")], A) is None


def test_cli_errors(tmp_path, capsys):
    junk = write_zip(tmp_path / "junk.zip", {"readme.txt": b"nothing here"})
    assert main(["collect", str(junk), "--assignment", "01", "--into", str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("transformer-course collect: error:") and "no layout fits" in err[0]
    assert main(["collect", str(tmp_path / "missing.zip"), "--assignment", "01", "--into", str(tmp_path / "s")]) == 1
    assert main(["collect", str(junk), "--assignment", "99", "--into", str(tmp_path / "s")]) == 1
    assert "the course has 01_self_attention" in capsys.readouterr().err
    # forced to a layout that does not fit: nothing collected, exit 1, the skipped names reported
    canvas = write_zip(tmp_path / "c.zip", {f"smith_1_2_{A}.ipynb": NOTEBOOK})
    assert main(["collect", str(canvas), "--assignment", "01", "--into", str(tmp_path / "s"),
                 "--layout", "moodle"]) == 1
    assert "nothing collected" in capsys.readouterr().err
    assert not (tmp_path / "s").exists() or not files_under(tmp_path / "s")


def test_collected_canvas_zip_is_graded(repo, tmp_path, capsys):
    """End to end: the solution handed in through Canvas (resubmitted, so renamed by Canvas) is found
    by its cells and gets every point."""
    source = dated_zip(tmp_path / "canvas.zip", {
        f"lovelaceada_12345_67890_{A}-1.ipynb": (repo.solutions / f"{A}.ipynb").read_bytes()})
    submitted = tmp_path / "submitted"
    assert main(["collect", str(source), "--assignment", "01", "--into", str(submitted)]) == 0
    out = tmp_path / "out"
    # due 9 h before Canvas made the zip (its entries' times): on time all the same, as Canvas says
    assert main(["grade", str(submitted), "--out", str(out), "--assignment", "01", "--workers", "1",
                 "--timeout", str(GRADING_TIMEOUT), "--due", DUE, "--late-policy", "fixed", "--late-points", "1"]) == 0
    table = capsys.readouterr().out
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert [(r["student_id"], r["assignment"], r["score"], r["max_score"], r["status"], r["late_penalty"],
             r["final_score"]) for r in rows] == [("12345", A, "11", "11", "graded", "0", "11")]
    # the run says where the time came from
    assert f"12345 {A}: on time: Canvas did not mark it LATE" in table
    # and the grade goes back into the gradebook Canvas exported: its header kept, one column filled
    export, filled = tmp_path / "export.csv", tmp_path / "filled.csv"
    export.write_text("Student,ID,SIS User ID,SIS Login ID,Section,01 Self-attention (1234),Current Points\n"
                      "    Points Possible,,,,,11.00,(read only)\n"
                      "\"Lovelace, Ada\",12345,s-1,ada@uni.edu,Section A,,0.00\n")
    fill = ["lms", "fill-canvas", str(out), "--gradebook", str(export), "--assignment", "01", "-o", str(filled)]
    assert main(fill) == 0  # its answers in words await formgrader: a part of a grade is not sent
    assert "kept: 12345: its answers in words are not graded yet" in capsys.readouterr().out
    assert filled.read_text() == export.read_text()
    rows = json.loads((out / "results.json").read_text())
    assert rows[0]["manual_status"] == "awaiting" and rows[0]["manual_max_score"] == 4
    rows[0].update(manual_score=3.0, manual_status="graded")  # as formgrader's points reach results.json
    (out / "results.json").write_text(json.dumps(rows))
    assert main(fill) == 0
    assert filled.read_text().splitlines() == [*export.read_text().splitlines()[:2],
                                               "\"Lovelace, Ada\",12345,s-1,ada@uni.edu,Section A,14,0.00"]


# -- hand-in times without the LMS's API (the module docstring's order) ----------------------------------

DUE = "2026-11-23T18:00:00+01:00"
DOWNLOADED = (2026, 11, 24, 3, 1, 0)  # the zip's entry times: when Canvas or Moodle made it, 9 h after DUE


def dated_zip(path: Path, members: dict[str, bytes], when: tuple = DOWNLOADED) -> Path:
    """A zip whose entries carry ``when``, as Canvas's (rubyzip's DOSTime.now) and Moodle's do: the download's time."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, when), data)
    return path


def lateness(into: Path, students: list[str], due: str = DUE):
    """Each hand-in's lateness as `grade` works it out (deadlines.apply), with a fixed penalty."""
    from transformer_course.grading.notebook.grade import ExerciseResult, SubmissionResult
    from transformer_course.instructors.deadlines import apply, load

    deadlines = load(None, due, policy="fixed", points=2)
    results = [SubmissionResult(s, A, "graded", exercises=[ExerciseResult("softmax", 9.0, 11.0)]) for s in students]
    where = {(s, A): (into / s / A, next((into / s / A).glob("*.ipynb"), None)) for s in students}
    apply(results, where, deadlines, now=dt.datetime(2027, 1, 1, tzinfo=dt.UTC))
    return {r.student_id: r for r in results}


@pytest.fixture
def canvas_class(tmp_path):
    """A Canvas download of four, made 9 h after the due date: an accented name (Canvas keeps letters of
    any script), a resubmission (renamed -1 by Canvas), a LATE flag, a timestamp.txt handed in."""
    return dated_zip(tmp_path / "submissions.zip", {
        f"lópezjosé_10001_501_{A}.ipynb": NOTEBOOK,
        f"müllerjürgen_10002_502_{A}-1.ipynb": NOTEBOOK,
        f"turingalan_LATE_10003_503_{A}.ipynb": NOTEBOOK,
        f"ngozichiamaka_10004_504_{A}.ipynb": NOTEBOOK,
        "ngozichiamaka_10004_505_timestamp.txt": b"2026-11-01T00:00:00+00:00",
    })


def test_a_canvas_download_makes_nobody_on_time_late(canvas_class, tmp_path, capsys):
    into = tmp_path / "class" / "submitted"
    assert main(["collect", str(canvas_class), "--assignment", "01", "--into", str(into)]) == 0
    out = capsys.readouterr().out
    assert "10004_505_timestamp.txt (timestamp.txt handed in by the student" in out
    assert not (into / "10004" / A / "timestamp.txt").exists()
    rows = lateness(into, ["10001", "10002", "10003", "10004"])
    for student in ("10001", "10002", "10004"):  # the archive's times (9 h after the due date) are not taken
        r = rows[student]
        assert (r.late_by, r.late_penalty, r.final_score, r.reason) == (0.0, 0.0, 9.0, "")
        assert r.late_note == "on time: Canvas did not mark it LATE, and its download holds no submission time"
    late = rows["10003"]  # LATE with no time: flagged to be checked, no penalty guessed
    assert (late.late_by, late.late_penalty, late.submitted_at) == (0.0, 0.0, "")
    assert late.reason.startswith("hand-in time: late, time unknown: Canvas marked it LATE")
    assert times.source_of(into, "10003", A) == CANVAS_LATE
    assert times.source_of(into, "10001", A) == CANVAS_ON_TIME
    names = {r["student_id"]: r["name"] for r in csv.DictReader((into.parent / "students.csv").open())}
    assert names["10001"] == "lópezjosé" and names["10002"] == "müllerjürgen"


def test_times_from_a_file_win_over_the_download(canvas_class, tmp_path, capsys):
    into = tmp_path / "class" / "submitted"
    given = tmp_path / "canvas times.csv"
    given.write_text("\ufeffstudent_id,assignment,submitted_at,comment\n"
                     "10003,01,2026-11-24T01:30:00+01:00,LATE by 7.5 h\n"
                     f"10001,{A},2026-11-23T16:59:59Z,\n"
                     "99999,01,2026-11-23T12:00:00+00:00,not in the download\n", encoding="utf-8")
    assert main(["collect", str(canvas_class), "--assignment", "01", "--into", str(into), "--times", str(given)]) == 0
    out = capsys.readouterr().out
    assert "hand-in times: --times canvas times.csv: 10001, 10003" in out
    assert "no hand-in collected for 1 of its rows: 99999/01_self_attention" in out
    rows = lateness(into, ["10001", "10002", "10003"])
    assert (rows["10003"].late_by, rows["10003"].late_penalty, rows["10003"].final_score) == (7.5, 2.0, 7.0)
    assert rows["10003"].late_note == "time from --times canvas times.csv" and rows["10003"].reason == ""
    assert (rows["10001"].late_by, rows["10001"].submitted_at) == (0.0, "2026-11-23T17:59:59+01:00")
    assert rows["10002"].late_note.startswith("on time: Canvas")  # not in the file: Canvas's flag decides


def test_a_moodle_download_has_no_time_and_says_so(tmp_path):
    source = dated_zip(tmp_path / "moodle.zip", {
        f"Zoë Ångström_301_assignsubmission_file/{A}.ipynb": NOTEBOOK,
        "Zoë Ångström_301_assignsubmission_file/timestamp.txt": b"2026-11-01T00:00:00Z",
        f"Émile Zola_302_assignsubmission_file/{A}.ipynb": NOTEBOOK})
    into = tmp_path / "submitted"
    report = collect(source, A, into)
    assert report.times == {MOODLE_NO_TIME: ["301", "302"]}
    rows = lateness(into, ["301", "302"])
    assert all((r.late_by, r.late_penalty) == (0.0, 0.0) for r in rows.values())
    assert rows["301"].reason.startswith("hand-in time: time unknown: Moodle's download holds no submission time")


def test_a_bad_times_file_names_every_bad_row_and_collects_nothing(canvas_class, tmp_path, capsys):
    given = tmp_path / "times.csv"
    given.write_text("student_id,assignment,submitted_at\n"
                     "10001,01,2026-11-23T18:00:00\n"  # no offset
                     "10002,09_nothing,2026-11-23T18:00:00Z\n"
                     "../x,01,2026-11-23T18:00:00Z\n"
                     "10003,01,yesterday\n"
                     "\n"
                     "10004,01,2026-11-23T18:00:00Z\n"
                     f"10004,{A},2026-11-23T19:00:00Z\n")
    into = tmp_path / "submitted"
    assert main(["collect", str(canvas_class), "--assignment", "01", "--into", str(into), "--times", str(given)]) == 1
    err = capsys.readouterr().err
    assert "5 bad rows, nothing collected" in err
    for said in ("line 2: submitted_at '2026-11-23T18:00:00' has no offset", "line 3: assignment '09_nothing'",
                 "line 4: student_id '../x'", "line 5: submitted_at 'yesterday' is not ISO 8601",
                 "line 8: 10004/01_self_attention is on line 7 already"):
        assert said in err
    assert not into.exists()
    given.write_text("id,when\n")
    with pytest.raises(CollectError, match="no column student_id, assignment, submitted_at"):
        read_times(given, [A])


@given(when=st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2099, 12, 31)),
       minutes=st.integers(-14 * 60 + 1, 14 * 60 - 1), zulu=st.booleans())
def test_a_time_in_any_offset_is_the_instant_the_grader_reads(when, minutes, zulu):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        aware = when.replace(tzinfo=dt.timezone(dt.timedelta(minutes=minutes)))
        text = aware.astimezone(dt.UTC).isoformat().replace("+00:00", "Z") if zulu else aware.isoformat()
        (root / "t.csv").write_text(f"student_id,assignment,submitted_at\n10001,01,{text}\n")
        into = root / "submitted"
        collect(write_zip(root / "c.zip", {f"x_10001_1_{A}.ipynb": NOTEBOOK}), A, into,
                times=read_times(root / "t.csv", [A]))
        found = submitted_at(into / "10001" / A, into / "10001" / A / f"{A}.ipynb")
        assert found == (aware, "time from --times t.csv", "")


def moodle_date(when: dt.datetime) -> str:
    """Moodle's userdate() in English (strftimedaydatetime, day and hour without a leading zero)."""
    hour = when.hour % 12 or 12
    return f"{when:%A}, {when.day} {when:%B} {when.year}, {hour}:{when:%M} {'PM' if when.hour >= 12 else 'AM'}"


def test_moodle_times_from_its_grading_worksheet(tmp_path, capsys):
    source = dated_zip(tmp_path / "moodle.zip", {
        f"Zoë Ångström_301_assignsubmission_file/{A}.ipynb": NOTEBOOK,
        f"Émile Zola_302_assignsubmission_file/{A}.ipynb": NOTEBOOK,
        f"Ada Lovelace_303_assignsubmission_file/{A}.ipynb": NOTEBOOK})
    sheet = tmp_path / "worksheet.csv"
    sheet.write_text("Identifier,Full name,Email address,Status,Grade,Maximum grade,Grade can be changed,"
                     "Last modified (submission),Last modified (grade),Feedback comments\n"
                     "Participant 301,Zoë Ångström,z@x,Submitted for grading,,11.00,Yes,"
                     "\"Monday, 23 November 2026, 5:59 PM\",-,\n"
                     "Participant 302,Émile Zola,e@x,Submitted for grading - 3 hours late,,11.00,Yes,"
                     "\"Monday, 23 November 2026, 9:00 PM\",-,\n"
                     "Participant 303,Ada Lovelace,a@x,Submitted for grading,,11.00,Yes,"
                     "\"Monday, 23 November 2026, 9:00 PM\",-,\n"
                     "Participant 304,No One,n@x,No submission,,11.00,Yes,-,-,\n")
    given = tmp_path / "fix.csv"
    given.write_text(f"student_id,assignment,submitted_at\n303,{A},2026-11-23T17:00:00+01:00\n")
    into = tmp_path / "submitted"
    args = ["collect", str(source), "--assignment", "01", "--into", str(into), "--worksheet", str(sheet)]
    assert main(args) == 1
    assert "--worksheet needs --worksheet-zone" in capsys.readouterr().err
    assert main([*args, "--worksheet-zone", "Mars/Olympus"]) == 1
    assert "not a time zone of the tz database" in capsys.readouterr().err
    assert main([*args, "--worksheet-zone", "Europe/Berlin", "--times", str(given)]) == 0
    rows = lateness(into, ["301", "302", "303"])
    assert (rows["301"].late_by, rows["301"].submitted_at) == (0.0, "2026-11-23T17:59:00+01:00")
    assert (rows["302"].late_by, rows["302"].late_penalty) == (3.0, 2.0)
    assert rows["302"].late_note == "time from moodle worksheet: Last modified (submission)"
    assert rows["303"].late_note == "time from --times fix.csv" and rows["303"].late_by == 0.0  # --times wins
    sheet.write_text("Identifier,Last modified (submission)\nParticipant 1,23/11/2026 17:59\n")
    with pytest.raises(CollectError, match=r"line 2: '23/11/2026 17:59' is not Moodle's"):
        read_worksheet_times(sheet, "Europe/Berlin", A)


@given(local=st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2099, 12, 31)),
       zone=st.sampled_from(["Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe",
                             "Pacific/Chatham", "UTC", "America/St_Johns"]))
def test_a_worksheet_time_is_read_in_its_zone(local, zone):
    local = local.replace(second=0, microsecond=0)
    with tempfile.TemporaryDirectory() as tmp:
        sheet = Path(tmp) / "w.csv"
        sheet.write_text(f'Identifier,Last modified (submission)\nParticipant 7,"{moodle_date(local)}"\n')
        when, source = read_worksheet_times(sheet, zone, A)[("7", A)]
    assert when == local.replace(tzinfo=zoneinfo.ZoneInfo(zone)) and when.utcoffset() is not None
