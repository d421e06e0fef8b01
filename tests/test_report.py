"""`transformer-course report OUT`: the class report built from a graded class (the sample
class of `make grade`, plus the solutions and the untouched stubs)."""

from __future__ import annotations

import re

import pytest

from transformer_course.cli import main
from transformer_course.instructors.report import build_report, mistake_of


def test_mistake_of_names_the_mistake_and_nothing_else():
    named = ("softmax(x, dim=1): softmax runs over the query axis; each query's weights must sum to 1 over "
             "the keys (dim=-1) (see section 2, 'Scaled dot-product attention').")
    assert mistake_of(named) == ("softmax runs over the query axis; each query's weights must sum to 1 over "
                                 "the keys (dim=-1)")
    assert mistake_of(named.replace("dim=1", "dim=0")) == mistake_of(named)  # the inputs do not split a mistake
    assert mistake_of("hidden tests: softmax(x) differs from the expected values: max abs error 0.3") is None
    assert mistake_of("not attempted (the stub raises NotImplementedError)") is None


@pytest.fixture(scope="module")
def report(graded):
    _, out = graded
    return build_report(out), graded[0]


def test_report_ranks_the_sample_class_mistakes_with_their_students(report):
    index, results = report
    page = index.read_text()
    table = page.split("<h2>Named mistakes", 1)[1].split("<h2>", 1)[0]
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td>(\d+)</td><td>([^<]*)</td></tr>", table)
    assert rows, "no named mistake listed"
    counts = [int(n) for _, _, n, _ in rows]
    assert counts == sorted(counts, reverse=True)
    # Every listed student did lose points on that exercise, and the count is the number of ids.
    for exercise, _, n, who in rows:
        ids = who.split(", ")
        assert len(ids) == int(n)
        for student in ids:
            lost = [e for (s, _), r in results.items() if s == student for e in r.exercises
                    if e.exercise == exercise and e.score < e.max_score]
            assert lost, (student, exercise)
    # dev's unstable softmax is named, with dev among its students.
    assert any(exercise == "softmax" and "dev" in who.split(", ") for exercise, _, _, who in rows)


def test_report_lists_who_was_not_graded_and_why_and_its_figures_exist(report):
    index, results = report
    page = index.read_text()
    not_graded = page.split("<h2>Not graded", 1)[1]
    for (student, assignment), r in results.items():
        if r.status != "graded":
            assert f"<td>{student}</td><td>{assignment}</td><td>{r.status}</td>" in not_graded
    for src in re.findall(r'<img src="([^"]+)"', page):
        assert (index.parent / src).stat().st_size > 10_000, src
    assert len(re.findall(r'<img src="', page)) == 2


def test_report_command_refuses_an_ungraded_folder(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "results.json" in capsys.readouterr().err


def test_report_shows_final_scores_with_the_raw_one_beside_a_late_penalty(report):
    """The figure plots the final score (after the late penalty), the table shows it with the raw score
    beside it, for the sample class's late student; an on-time notebook shows one number."""
    from transformer_course.instructors.report import _load, score_points

    index, results = report
    late = [(s, a, r) for (s, a), r in results.items() if r.late_penalty]
    assert late, "the sample class has a late notebook"
    page = index.read_text()
    table = page.split("<h2>Scores", 1)[1].split("<h2>", 1)[0]
    for student, assignment, r in late:  # the row of that student holds both
        row = next(line for line in table.split("<tr>") if line.startswith(f"<td>{student}</td>"))
        assert f"{r.final_score:g} / {r.max_score:g} (raw {r.score:g})" in row
        plotted = [(f, raw) for a, f, raw, _ in score_points(_load(index.parent.parent)) if a == assignment]
        assert (pytest.approx(100 * r.final_score / r.max_score), pytest.approx(100 * r.score / r.max_score)) in plotted
    on_time = next(r for r in results.values() if r.status == "graded" and not r.late_penalty and r.score)
    assert f"<td>{on_time.final_score:g} / {on_time.max_score:g}</td>" in table \
        or f"<td>{on_time.final_score:g} / {on_time.max_score:g}; written " in table  # and its answers in words


# --- Names beside the ids (issue 60, item 4): hostile input, in-process -----------------------------------

import csv  # noqa: E402
import html as html_module  # noqa: E402
import tempfile  # noqa: E402
import unicodedata  # noqa: E402
from html.parser import HTMLParser  # noqa: E402
from pathlib import Path  # noqa: E402

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from transformer_course.grading.notebook.grade import ExerciseResult, SubmissionResult  # noqa: E402
from transformer_course.instructors import roster  # noqa: E402

HOSTILE_NAMES = ["<script>alert(1)</script>", "\u202eexe.gnp", "Ada\u2066 \u2069Lovelace", "x" * 10_000,
                 '=cmd|" /C calc"!A0', "\x1b[31mred\x1b[0m\r\nnext", "Zoë\u200dZ", "&amp; &lt;b&gt;", "  ", "\ud800"]
NAMES = st.one_of(st.sampled_from(HOSTILE_NAMES), st.text(max_size=200),
                  st.lists(st.sampled_from(HOSTILE_NAMES + ["a", " ", "<", ">", "&", '"', "'", "\u202e", "\x00"]),
                           max_size=8).map("".join))


class Elements(HTMLParser):
    """The elements of a page (tag, attributes), its text, and whether it has a script."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _shown_safely(name: str) -> None:
    """What the tools show of ``name``: no control or format character but the joiners, 60 characters at most."""
    assert len(name) <= roster.MAX_NAME and name == name.strip()
    assert all(c in roster.JOINERS or unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Co", "Cn") for c in name)


@given(NAMES, st.sampled_from(["10001", "ada", "<b>id</b>"]))
def test_a_name_is_shown_cleaned_escaped_and_isolated(name, student):
    """Any name: cleaned (twice is once), on a page only inside <bdi> (no element of its own), its text as
    cleaned; the feedback page's heading idempotent, the late banner kept below it; roster.csv round-trips it
    and no cell of it starts as a formula."""
    from transformer_course.grading.output.spreadsheet import FORMULA_START
    from transformer_course.grading.run.publish import late_banner
    from transformer_course.instructors.deadlines import load as load_deadlines

    clean = roster.cleaned(name)
    _shown_safely(clean)
    assert roster.cleaned(clean) == clean
    names = {student: clean} if clean else {}
    shown = Elements(roster.label_html(student, names))
    assert [tag for tag, _ in shown.elements] == (["bdi"] if clean else [])
    assert "".join(shown.text) == (f"{clean} ({student})" if clean else student)
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "page.html"
        page.write_text("<html><body><h4>01 (Score: 1 / 1)</h4></body></html>")
        deadlines = load_deadlines(None, "2026-11-24T23:59:00+01:00")
        late_banner(page, SubmissionResult(student, "01_self_attention", "graded"), deadlines)
        roster.heading_on_page(page, student, names)
        once = page.read_text()
        late_banner(page, SubmissionResult(student, "01_self_attention", "graded"), deadlines)
        roster.heading_on_page(page, student, names)
        assert page.read_text() == once  # a second run: the same page
        tags = [tag for tag, _ in Elements(once).elements]
        assert tags == ["html", "body", *(["p", "bdi"] if clean else []), "div", "h4"], tags  # name, banner, page
        roster.keep(Path(folder), names)
        assert roster.read(Path(folder) / roster.KEPT) == names if names else not (Path(folder) / roster.KEPT).exists()
        if names:
            # the name's cell as a spreadsheet reads it (CSV quoting undone: '"@' is the text "@, no formula)
            with open(Path(folder) / roster.KEPT, newline="") as f:
                cells = list(csv.reader(f))[1]
            assert not cells[1].startswith(FORMULA_START), cells


def test_a_roster_is_read_by_column_name_and_the_run_takes_the_first_found(tmp_path, capsys):
    from transformer_course.cli import main

    submitted = tmp_path / "SUBMITTED"
    submitted.mkdir()
    (tmp_path / "students.csv").write_text(  # collect's, with the LMS's columns after its own
        "student_id,name,lms,late,login_id,sis_user_id\n10001,Ada Lovelace,canvas,,ada,S1\n10002,,canvas,,ben,S2\n")
    mine = tmp_path / "mine.csv"
    mine.write_text("\ufeffname,student_id\nGrace Hopper,10001\n")  # Excel's byte-order mark, other order
    assert roster.for_run(submitted) == {"10001": "Ada Lovelace"}  # 10002 has no name: the id alone
    assert roster.for_run(submitted, mine) == {"10001": "Grace Hopper"}
    out = tmp_path / "OUT"
    out.mkdir()
    roster.keep(out, {"10003": "Cho"})
    assert roster.for_run(out=out) == roster.for_run(tmp_path / "a" / "b", out=out) == {"10003": "Cho"}
    capsys.readouterr()
    (tmp_path / "students.csv").write_text("id,who\n10001,Ada\n")  # not collect's: no names, the run goes on
    assert roster.for_run(submitted) == {}
    said = capsys.readouterr().err  # and says so
    assert f"warning: {tmp_path / 'students.csv'}: no student_id or name column" in said and "ids alone" in said
    mine.write_text("student_id,full_name\n10001,Ada\n")
    with pytest.raises(roster.RosterError, match="no name column; expected a header with student_id and name"):
        roster.for_run(submitted, mine)
    # through the command: refused before any grading
    assert main(["grade", str(submitted), "--out", str(out / "x"), "--roster", str(tmp_path / "none.csv")]) == 2
    assert "roster" in capsys.readouterr().err and not (out / "x").exists()


def test_the_run_table_shows_names_sorted_by_name_and_nothing_a_terminal_runs():
    from transformer_course.grading.notebook.grade import score_table

    results = [SubmissionResult(s, "01_self_attention", "graded", exercises=[ExerciseResult("softmax", 3.0, 3.0)])
               for s in ("10001", "10002", "10003", "10004")]
    names = {"10001": roster.cleaned("Zoë \x1b[31mZ\u202e"), "10002": roster.cleaned("ada " + "x" * 10_000),
             "10003": "Émile"}
    lines = score_table(results, names).splitlines()
    assert [line.split()[0] for line in lines[1:5]] == ["ada", "Émile", "Zoë", "10004"]  # by name, the unnamed last
    assert "(10002)" in lines[1] and len(lines[1]) < 120 and not any(c in "\x1b\u202e" for c in "".join(lines))
    assert score_table(results).splitlines()[1].startswith("10001 ")  # no names: by id, as before


def _made_up_class(out: Path) -> dict[str, str]:
    """results.json of three students (one excused, one extended, one late) and their hostile names in roster.csv."""
    from transformer_course.grading.run.publish import write_csvs

    def result(student, score, **late):
        return SubmissionResult(student, "01_self_attention", "graded", "",
                                [ExerciseResult("softmax", score, 11.0, "")], **late)

    names = {"10001": "<script>alert(1)</script>", "10002": "\u202eexe.gnp", "10003": "Ada Lovelace"}
    write_csvs([result("10001", 11.0, excused=True),
                result("10002", 9.0, submitted_at="2026-11-26T13:00:00+01:00", due="2026-11-25T23:59+01:00",
                       late_by=13.02, late_penalty=1.0, extended=True),
                result("10003", 5.0)], out)
    roster.keep(out, {s: roster.cleaned(n) for s, n in names.items()})
    return names


def test_the_report_shows_names_in_sortable_tables_and_never_runs_one(tmp_path):
    _made_up_class(tmp_path)
    page = build_report(tmp_path).read_text()
    found = Elements(page)
    assert [tag for tag, _ in found.elements].count("script") == 1  # the sorting script, no name's
    text = "".join(found.text)
    scores = page.split("<h2>Scores", 1)[1].split("<h2>", 1)[0]
    assert "<table class=sortable><thead><tr><th>student</th><th>name</th>" in scores
    rows = re.findall(r"<tr><td>(\d+)</td><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td></tr>", scores)
    # by name ("<script>...", "Ada Lovelace", "exe.gnp" without its override); the excused one in no total
    assert [(s, a, total) for s, _, a, total in rows] == [
        ("10001", "excused", "0 / 0"), ("10003", "5 / 11", "5 / 11"), ("10002", "8 / 11 (raw 9)", "8 / 11")]
    assert rows[0][1] == f"<bdi>{html_module.escape('<script>alert(1)</script>')}</bdi>"
    assert "<script>alert(1)</script>" in text and "\u202e" not in page
    assert "2026-11-25 23:59 +01:00 (extended)" in page and "Excused (" in page
    other = tmp_path / "other.csv"
    other.write_text("student_id,name\n10003,Grace Hopper\n")
    assert "<bdi>Grace Hopper</bdi>" in build_report(tmp_path, other).read_text()  # --roster wins


def test_the_similarity_pages_show_names_beside_the_ids(tmp_path):
    from transformer_course.instructors import similarity

    code = ("def f(x):\n    total = 0\n    for i in range(len(x)):\n        total = total + x[i] * x[i] - i\n"
            "    return total / max(len(x), 1) + sum(x) * 3\n")
    answers = {"f": {"10001": code, "10002": code, "10003": "def f(x):\n    return sorted(set(x))[::-1]\n"}}
    report = similarity.compare(answers, {"f": "def f(x):\n    raise NotImplementedError\n"}, {}, {"f": "01"},
                                threshold=0.5, min_chars=10)
    report.names = {"10001": roster.cleaned("<script>alert(1)</script>"), "10002": "Ben"}
    index = similarity.write(report, tmp_path)
    page = index.read_text()
    assert [tag for tag, _ in Elements(page).elements].count("script") == 1
    assert f"<bdi>{html_module.escape('<script>alert(1)</script>')}</bdi> (10001)" in page
    assert "<bdi>Ben</bdi> (10002)" in page and "<table class=sortable>" in page
    pair = (tmp_path / similarity.page_name(report.flagged[0])).read_text()
    assert "<bdi>Ben</bdi> (10002)" in pair and [t for t, _ in Elements(pair).elements].count("script") == 0
    assert "~ Ben (10002)" in similarity.summary(report)  # the command's own lines


def test_a_run_keeps_the_names_for_report_and_warns_of_a_student_the_deadlines_name_alone(small_class, tmp_path,
                                                                                           capsys, monkeypatch):
    """Through the command, without kernels (every notebook recorded as not handed in): the names of
    students.csv in the table and OUT/roster.csv, bob excused by excused.csv, a typo in [excused] warned of."""
    from transformer_course.cli import main
    from transformer_course.grading.run import batch

    monkeypatch.setattr(batch, "grade_task", lambda root, limits, threads, work_root, task: batch._missing(
        task, next(a for a in batch.Repo(Path(root)).assignments() if a.name == task.assignment)))
    (tmp_path / "students.csv").write_text("student_id,name,lms,late\nada,=cmd|' /C calc'!A0,canvas,\n"
                                           "cho,Cho Chang,canvas,\n")
    (tmp_path / "excused.csv").write_text("student_id,assignment\nbob,01_self_attention\n")
    deadlines = tmp_path / "deadlines.toml"
    deadlines.write_text('due = "2026-11-23T12:00:00+00:00"\n[excused]\n"ado" = ["01_self_attention"]\n')
    out = tmp_path / "out"
    assert main(["grade", str(small_class), "--out", str(out), "--assignment", "01", "--workers", "1",
                 "--deadlines", str(deadlines)]) == 0
    captured = capsys.readouterr()
    assert "the deadlines name student(s) with no folder in" in captured.err and ": ado (a typo" in captured.err
    table = captured.out.split("\n\n", 1)[0].splitlines()
    assert [line.split("  ")[0].strip() for line in table[1:]] == ["=cmd|' /C calc'!A0 (ada)", "Cho Chang (cho)",
                                                                    "bob"]
    assert "excused" in table[3] and "missing" in table[1]
    assert "'=cmd|" in (out / "roster.csv").read_text()  # the spreadsheet-safe writer's quote
    assert roster.for_run(out=out) == {"ada": "=cmd|' /C calc'!A0", "cho": "Cho Chang"}


@pytest.mark.slow
def test_a_class_run_shows_names_extensions_and_excused_students_everywhere(small_class, tmp_path, capsys):
    """Through the command, on two real notebooks of 01 (both handed in 2026-11-23 18:00 UTC, 6 h after the
    class's due date) and bob's nothing: ada has an extension, bob is excused by the LMS's excused.csv; the
    names come from collect's students.csv beside SUBMITTED. A minute: `make bench` runs it."""
    import datetime as dt
    import json

    from tests.conftest import GRADING_TIMEOUT
    from transformer_course.cli import main

    (tmp_path / "students.csv").write_text("student_id,name,lms,late,login_id,sis_user_id\n"
                                           "ada,<script>alert(1)</script>,canvas,,ada,S1\n"
                                           "cho,Cho Chang,canvas,,cho,S3\n")
    (tmp_path / "excused.csv").write_text("student_id,assignment\nbob,01_self_attention\n")
    deadlines = tmp_path / "deadlines.toml"
    deadlines.write_text('due = "2026-11-23T12:00:00+00:00"\n[late]\npolicy = "fixed"\npoints = 1\n'
                         '[extensions]\n"ada" = { "01_self_attention" = 24 }\n')
    out = tmp_path / "out"
    assert main(["grade", str(small_class), "--out", str(out), "--assignment", "01", "--workers", "1",
                 "--timeout", str(GRADING_TIMEOUT), "--deadlines", str(deadlines)]) == 0
    table = capsys.readouterr().out.split("\n\n", 1)[0].splitlines()
    assert [line.split("  ")[0].strip() for line in table[1:]] == ["<script>alert(1)</script> (ada)",
                                                                    "Cho Chang (cho)", "bob"]  # by name
    assert " ext " in table[1] and "late -1" in table[2] and "excused" in table[3]
    kept = {r["student_id"]: r for r in json.loads((out / "results.json").read_text())}
    assert (kept["ada"]["extended"], kept["ada"]["late_penalty"], kept["bob"]["excused"]) == (True, 0.0, True)
    page = (out / "feedback" / "ada" / "01_self_attention" / "01_self_attention.html").read_text()
    assert "<bdi>&lt;script&gt;alert(1)&lt;/script&gt;</bdi> (ada)" in page and "<script>alert(1)" not in page
    assert ("due 2026-11-24 12:00 +00:00 (your extension; the class's due date is 2026-11-23 12:00 +00:00): on "
            "time.") in page
    assert page.index("course: student -->") < page.index("course: lateness -->")  # the name on top
    from nbgrader.api import Gradebook  # the formgrader's due date for ada: her own

    with Gradebook(f"sqlite:///{out / 'nbgrader' / 'gradebook.db'}") as gb:
        assert gb.find_submission("01_self_attention", "ada").extension == dt.timedelta(hours=24)
        assert gb.find_submission("01_self_attention", "cho").extension is None
    assert main(["report", str(out)]) == 0
    report = (out / "report" / "index.html").read_text()
    assert "<bdi>Cho Chang</bdi>" in report and "<script>alert(1)" not in report
