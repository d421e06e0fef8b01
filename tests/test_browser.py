"""A student in JupyterLab, in a real (headless) Chromium: run the stubs, see a test fail
with a clear message, fill one stub, run again, see its test pass and its heatmap render.
Also: nbgrader's JupyterLab extensions load, the formgrader opened in a graded class's
OUT/nbgrader shows its scores, and the book's first page renders; the book and the feedback
pages typeset their formulas with no network (MathJax shipped beside them), and the class
report shows its figures.

Needs Chromium (`make browser` installs Debian's package) and Playwright (a dev pin);
skips with the reason otherwise. Screenshots go to build/screenshots/.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "build" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
A01 = "01_self_attention"
SOFTMAX = (
    "def softmax(x, dim=-1):\n"
    "    e = (x - x.amax(dim=dim, keepdim=True)).exp()\n"
    "    return e / e.sum(dim=dim, keepdim=True)\n"
)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: run `make browser` (Debian's chromium "
                                "package) or set CHROMIUM=/path/to/chromium")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _jupyter_lab(root: Path):
    """JupyterLab on 127.0.0.1 (random port, token auth), started in ``root``: (base URL, token)."""
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root / ".jupyter"), JUPYTER_RUNTIME_DIR=str(root / ".runtime"))
    log = open(root / "lab.log", "w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--LabApp.news_url=",
         *(["--allow-root"] if os.geteuid() == 0 else [])],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"JupyterLab exited: {(root / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not start in 60 s")
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab over a copy of course/01."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "course" / A01, root / A01)
    with _jupyter_lab(root) as (base, token):
        yield base, token, root


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (a dev pin)")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        yield chromium
        chromium.close()


def _dismiss_news(page) -> None:
    """JupyterLab asks once whether to fetch Jupyter news; answer no (it would cover the notebook)."""
    no = page.get_by_role("button", name="No", exact=True)
    if no.count() and no.first.is_visible():
        no.first.click()


def _run_all(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    # Wait until the kernel has gone busy and back to idle.
    page.wait_for_timeout(1500)
    page.wait_for_function(
        "() => !document.querySelector('.jp-Notebook .jp-InputArea-prompt') || "
        "![...document.querySelectorAll('.jp-InputArea-prompt')].some(p => p.textContent.includes('*'))",
        timeout=120_000)


def _output_of(page, marker: str):
    """The output area of the code cell whose source contains ``marker``."""
    cell = page.locator(".jp-CodeCell", has=page.locator(".cm-content", has_text=marker)).first
    return cell.locator(".jp-OutputArea")


def test_student_runs_fails_fills_and_passes(lab, browser):
    base, token, _ = lab
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    page.goto(f"{base}/lab/tree/{A01}/{A01}.ipynb?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
    page.wait_for_timeout(1000)
    _dismiss_news(page)

    _run_all(page)
    failure = _output_of(page, "softmax: visible tests passed")
    failure.locator("[data-mime-type='application/vnd.jupyter.stderr']").wait_for(timeout=60_000)
    failure.scroll_into_view_if_needed()
    text = failure.text_content() or ""
    assert "NotImplementedError" in text and "replace this line with your code" in text
    assert len(text.splitlines()) < 40, f"a wall of traceback ({len(text.splitlines())} lines)"
    page.wait_for_timeout(1000)
    page.screenshot(path=str(SHOTS / "01-stub-fails.png"))

    editor = page.locator(".jp-CodeCell", has=page.locator(".cm-content", has_text="def softmax(")).first
    editor.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(SOFTMAX)
    page.keyboard.press("Escape")
    _run_all(page)
    passed = _output_of(page, "softmax: visible tests passed")
    passed.get_by_text("softmax: visible tests passed").wait_for(timeout=60_000)
    heatmap = _output_of(page, "demo_scores = torch.tensor").locator("img")
    heatmap.first.wait_for(timeout=60_000)
    assert heatmap.first.evaluate("img => img.naturalWidth") > 100
    heatmap.first.scroll_into_view_if_needed()
    page.wait_for_timeout(1000)  # JupyterLab renders cells as they scroll into view
    page.screenshot(path=str(SHOTS / "02-stub-filled-passes.png"))
    page.close()


def test_nbgrader_extensions_load(lab, browser):
    base, token, _ = lab
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{base}/lab?token={token}")
    page.wait_for_selector(".lm-MenuBar-itemLabel", timeout=90_000)
    menu = page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader")
    menu.first.click()
    labels = page.locator(".lm-Menu-itemLabel").all_inner_texts()
    assert any("Formgrader" in label for label in labels), labels
    assert any("Assignment List" in label for label in labels), labels
    page.screenshot(path=str(SHOTS / "03-nbgrader-menu.png"))
    page.close()


def test_book_first_page_renders(repo, browser, tmp_path):
    from transformer_course.course.book import build_book

    index = build_book(repo, tmp_path / "book")
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(index.as_uri())
    page.wait_for_selector("text=Build a Transformer")
    assert page.locator("a[href='01_self_attention.html']").count() >= 1
    page.screenshot(path=str(SHOTS / "04-book.png"))
    _offline(page)
    page.goto((index.parent / "02_scaled_dot_product.html").as_uri())
    page.wait_for_selector("mjx-container", state="attached", timeout=30_000)  # typeset offline (some sit in hints)
    page.goto((index.parent / "instructors.html").as_uri())  # a guide, in the book's first part
    page.wait_for_selector("h2:has-text('Deadlines and late penalties')")  # the section, not the hidden nav link
    assert page.locator("a[href='grader.html']").count() >= 1
    page.screenshot(path=str(SHOTS / "05-book-guide.png"))
    page.close()


def _offline(page) -> None:
    """Refuse every request that leaves the machine: what renders, renders from local files."""
    page.route(re.compile(r"^https?://"), lambda route: route.abort())  # file:// pages load untouched


# A student's answer in words made to take over formgrader's page (nbgrader 0.9.6, formgrade.js and
# formgrade_models.js): each score box is found as $("#" + grade_id).parents(".nbgrader_cell") (the first
# element with that id wins), so an element of the student's with the *second* question's id, inside the
# first question's cell, would bind the second question's score to the first question's box; a heading's
# id is its text; Bootstrap's "modal-backdrop in" covers the page. The first question is the one answered.
FIRST_QUESTION, SECOND_QUESTION = "question_stable_softmax", "question_toy_attention"
TAKEOVER = (f'<div class="modal-backdrop in"></div>\n\n<span id="{SECOND_QUESTION}" class="nbgrader_cell">'
            f'<span class="score tabbable">score</span></span>\n\n# {SECOND_QUESTION}\n\n'
            f'<div class="navbar-fixed-top" style="position:fixed;top:0;left:0;width:100%;height:100%;'
            f'z-index:99999;background:white">cover</div>\n\nMy answer: subtract the maximum.')


@pytest.fixture(scope="module")
def formgrader_class(repo, tmp_path_factory):
    """ada and dev of the sample class and "mallory" (ada's notebook, with :data:`TAKEOVER` as her first
    answer in words), graded by ``grade_class``: OUT."""
    import nbformat

    from transformer_course.grading.run.batch import grade_class

    from .conftest import GRADING_TIMEOUT

    root = tmp_path_factory.mktemp("formgrader")
    submitted = root / "submitted"
    for student in ("ada", "dev"):
        shutil.copytree(repo.sample_class / student / A01, submitted / student / A01)
    shutil.copytree(repo.sample_class / "ada" / A01, submitted / "mallory" / A01)
    path = submitted / "mallory" / A01 / f"{A01}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    answers = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == FIRST_QUESTION]
    assert len(answers) == 1, f"notebook 01 has no answer cell {FIRST_QUESTION}"
    answers[0].source = TAKEOVER
    nbformat.write(notebook, path)
    grade_class(submitted, root / "out", repo, timeout=GRADING_TIMEOUT, progress=False, workers=1)
    return root / "out"


@pytest.fixture(scope="module")
def formgrader(formgrader_class):
    """JupyterLab started in OUT/nbgrader (the README's way to open formgrader), once: (base URL, token)."""
    with _jupyter_lab(formgrader_class / "nbgrader") as (base, token):
        yield base, token


def test_formgrader_shows_the_graded_class(formgrader_class, formgrader, browser):
    """The README's way to see a graded class: JupyterLab started in OUT/nbgrader, Formgrader."""
    base, token = formgrader
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(60_000)
    page.goto(f"{base}/formgrader/manage_students?token={token}")
    row = page.locator("tr", has_text="ada")
    row.first.wait_for()
    assert "11" in row.first.inner_text()
    page.screenshot(path=str(SHOTS / "05-formgrader-students.png"))
    page.goto(f"{base}/formgrader/gradebook/{A01}/{A01}?token={token}")
    rows = page.locator("tbody tr", has_text="dev")
    rows.first.wait_for()
    text = page.locator("tbody").inner_text()
    # formgrader's totals count the 4 points of the answers in words (its "written" column), which
    # await grading by hand; the code column is the grader's
    assert "8 / 15" in text and "11 / 15" in text and "8 / 11" in text and "0 / 4" in text, text
    page.screenshot(path=str(SHOTS / "06-formgrader-submissions.png"))
    page.goto(f"{base}/formgrader?token={token}")
    page.locator("tr", has_text="02_scaled_dot_product").first.wait_for()
    cells = [c.strip() for c in page.locator("tr", has_text=A01).first.locator("td").all_inner_texts()]
    assert "3" in cells, cells  # three submissions
    # every formgrader page docs/instructors.md names in bold ("**Manual Grading**") is in its menu
    menu = {" ".join(t.split()) for t in page.locator(".nav-pills li a").all_inner_texts()}
    quoted = {" ".join(name.split()) for name in re.findall(r"\*\*((?:Manage|Manual)\s[^*]+)\*\*",
                                                              (ROOT / "docs" / "instructors.md").read_text())}
    assert quoted and quoted <= menu, f"the docs name {sorted(quoted - menu)}; formgrader's menu: {sorted(menu)}"
    page.screenshot(path=str(SHOTS / "07-formgrader-assignments.png"))
    page.close()
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    _offline(page)
    page.goto((formgrader_class / "feedback" / "dev" / A01 / f"{A01}.html").as_uri())
    page.wait_for_selector("mjx-container", state="attached", timeout=30_000)  # formulas typeset with no network
    page.screenshot(path=str(SHOTS / "08-feedback-math.png"))
    from transformer_course.instructors.report import build_report

    page.goto(build_report(formgrader_class).as_uri())
    page.wait_for_selector("text=Named mistakes")
    sizes = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
    assert len(sizes) == 2 and all(w > 300 for w in sizes), sizes  # both figures load and render
    assert "dev" in page.locator("table").first.inner_text()
    page.screenshot(path=str(SHOTS / "09-class-report.png"), full_page=True)
    page.close()


def _grades(base: str, token: str, submission: int) -> dict[str, float | None]:
    """formgrader's own record of the submission's scores by hand (its API): grade id -> manual score."""
    with urllib.request.urlopen(f"{base}/formgrader/api/grades?submission_id={submission}&token={token}",
                                timeout=30) as reply:
        return {grade["name"]: grade["manual_score"] for grade in json.load(reply)}


def _wait_for_grades(base, token, submission, expected: dict, seconds: float = 10) -> dict:
    for _ in range(int(seconds * 4)):
        grades = _grades(base, token, submission)
        if all(grades.get(name) == value for name, value in expected.items()):
            break
        time.sleep(0.25)
    return grades


def test_a_students_markup_cannot_move_a_typed_score_or_hide_the_form(formgrader_class, formgrader, browser):
    """In the real formgrader, on mallory's notebook (:data:`TAKEOVER` in her first answer: an element with
    the second question's id and formgrader's classes, a heading named like it, a full-page overlay by
    class and by style): a score typed in the second question's box is saved to the second question, one
    typed in the first to the first, and each box is the element under its own centre (nothing covers it)."""
    from nbgrader.api import Gradebook

    base, token = formgrader
    with Gradebook(f"sqlite:///{formgrader_class / 'nbgrader' / 'gradebook.db'}") as gb:
        submission = gb.find_submission_notebook(A01, A01, "mallory").id
    assert _grades(base, token, submission)[SECOND_QUESTION] is None, "a score before any was typed"
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(15_000)
    page.set_extra_http_headers({"Authorization": f"token {token}"})  # formgrader's API calls, as logged in
    # formgrader loads MathJax from a CDN: refused, as on a machine with no network
    page.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), lambda route: route.abort())
    page.goto(f"{base}/formgrader/submissions/{submission}?token={token}")
    page.wait_for_function("() => window.formgrader && formgrader.grades && formgrader.grades.loaded")
    assert "subtract the maximum" in page.locator(".nbgrader_cell", has_text="My answer").first.inner_text()
    for question, score in ((SECOND_QUESTION, "1.5"), (FIRST_QUESTION, "0.5")):
        box = page.locator(f"input.score[id='{question}']")
        assert box.count() == 1, f"formgrader's score box for {question}: {box.count()} found"
        box.scroll_into_view_if_needed()
        on_top = box.evaluate("el => { const r = el.getBoundingClientRect(); "
                              "const top = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2); "
                              "return top === el ? '' : (top ? top.outerHTML.slice(0, 200) : 'nothing'); }")
        assert on_top == "", f"the score box of {question} is covered by {on_top}"
        box.click()
        box.fill(score)
        box.blur()  # formgrader saves a score when its box loses focus ("change")
        page.wait_for_timeout(500)
    page.screenshot(path=str(SHOTS / "10-formgrader-takeover.png"))
    grades = _wait_for_grades(base, token, submission, {SECOND_QUESTION: 1.5, FIRST_QUESTION: 0.5})
    assert grades[SECOND_QUESTION] == 1.5 and grades[FIRST_QUESTION] == 0.5, \
        f"typed 1.5 for {SECOND_QUESTION} and 0.5 for {FIRST_QUESTION}; formgrader saved {grades}"
    page.close()


def test_formgrader_typesets_the_question_shows_its_rubric_and_every_point_given_counts(
        formgrader_class, formgrader, browser, repo):
    """dev's notebook 01 in the real formgrader with no network: the question's formulas typeset (MathJax from
    OUT/nbgrader, not the CDN) and each question in words has its rubric (docs/instructors.md) just before its
    answer, framed as the instructor's; and no exchange banner. Scores typed over the grader's on softmax's test
    cells (0 -> 3 points), extra credit on another, and a comment, all through formgrader's own boxes, reach
    grades.csv, lms.csv, results.json and dev's feedback page once `report` reads the gradebook."""
    from nbgrader.api import Gradebook

    from transformer_course.grading.run.classbook import rubrics
    from transformer_course.grading.run.publish import refresh_written

    base, token = formgrader
    with Gradebook(f"sqlite:///{formgrader_class / 'nbgrader' / 'gradebook.db'}") as gb:
        submission = gb.find_submission_notebook(A01, A01, "dev").id
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(15_000)
    page.set_extra_http_headers({"Authorization": f"token {token}"})
    page.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), lambda route: route.abort())  # no network
    page.goto(f"{base}/formgrader/submissions/{submission}?token={token}")
    page.wait_for_function("() => window.formgrader && formgrader.grades && formgrader.grades.loaded")
    page.wait_for_selector("mjx-container", state="attached", timeout=30_000)  # "$W_Q = W_K = I$" typeset
    framed = page.locator(".alert-info").all_inner_texts()
    expected = rubrics(repo)
    assert len(framed) == 2 and all(t.startswith("Rubric") for t in framed), framed
    for text, question in zip(framed, (FIRST_QUESTION, SECOND_QUESTION), strict=True):
        assert expected[question][1][:60] in text, (question, text)
    # each rubric is the cell right before its question's answer
    before = page.evaluate("ids => ids.map(id => document.getElementById(id).closest('.cell')"
                           ".previousElementSibling.innerText.slice(0, 6))", [FIRST_QUESTION, SECOND_QUESTION])
    assert before == ["Rubric", "Rubric"], before
    for selector, value in (("input.score[id='test_softmax']", "1"), ("input.score[id='test_softmax_hidden']", "2"),
                            ("input.extra-credit[id='test_self_attention_extra_credit']", "0.5"),
                            ("textarea[id='softmax-comment']", "Stable enough here: see **section 2**.")):
        box = page.locator(selector)
        box.scroll_into_view_if_needed()
        box.click()
        box.fill(value)
        box.blur()  # formgrader saves on "change"
        page.wait_for_timeout(500)
    page.screenshot(path=str(SHOTS / "11-formgrader-by-hand.png"))
    page.goto(f"{base}/formgrader/manage_assignments?token={token}")
    page.locator("tr", has_text=A01).first.wait_for()
    assert page.locator("#warning-exchange").count() == 0, "formgrader says the exchange directory is missing"
    page.close()
    for _ in range(40):  # formgrader's saves are asynchronous
        with Gradebook(f"sqlite:///{formgrader_class / 'nbgrader' / 'gradebook.db'}") as gb:
            notebook = gb.find_submission_notebook(A01, A01, "dev")
            saved = ({g.name: (g.manual_score, g.extra_credit) for g in notebook.grades},
                     {c.name: c.manual_comment for c in notebook.comments})
        if saved[0]["test_self_attention"][1] and saved[1]["softmax"]:
            break
        time.sleep(0.25)
    assert saved[0]["test_softmax_hidden"] == (2.0, None) and saved[0]["test_self_attention"][1] == 0.5, saved

    results = {(r.student_id, r.assignment): r for r in refresh_written(formgrader_class, repo)}
    dev = results[("dev", A01)]
    assert (dev.score, dev.final_score) == (11.5, 11.5)
    feedback = (formgrader_class / "feedback" / "dev" / A01 / f"{A01}.html").read_text()
    assert "Score: 2 / 2 (given by hand; the grader gave 0)" in feedback
    assert "Score: 1 / 1 + 0.5 extra credit" in feedback
    assert "Stable enough here: see <strong>section 2</strong>." in feedback
    row = next(r for r in json.loads((formgrader_class / "results.json").read_text()) if r["student_id"] == "dev")
    assert row["final_score"] == 11.5 and {o["cell"] for o in row["overrides"]} == {
        "test_softmax", "test_softmax_hidden", "test_self_attention"}
    lms = (formgrader_class / "lms.csv").read_text().splitlines()
    assert next(line for line in lms if line.startswith("dev,")).split(",")[1] == "11.5", lms
