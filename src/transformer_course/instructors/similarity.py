"""Similarity report: ``transformer-course similarity OUT`` (and a section of ``transformer-course report``).

Students first (:func:`students`, :func:`groups`): every exercise, short ones included, each student's answer
against every classmate's and the published solution's, as written and in an equivalent form
(:mod:`.equivalent`), measured against what the class's answers to that exercise typically share; a
student's evidence against a source is the mean over the exercises both answered, weighted by length, so
that many short exercises copied together add up. Students at or above ``STUDENT_THRESHOLD`` are grouped by
source (the published solution, or classmates), each with a page of every exercise side by side.

Then pairs: for every exercise, each student's answer cell is compared with every other student's and with the
published solution's. The matching is copydetect's (https://github.com/blingenf/copydetect): code is
tokenised by pygments with variable, function and class names, strings, comments and whitespace
normalised away, then compared by k-gram fingerprints (Schleimer, Wilkerson and Aiken 2003, the method
of MOSS). Renaming variables, adding comments or reformatting does not hide a copy; the lines that
match are highlighted side by side on a page per pair.

The release's own stub (signature, docstring, given lines) is boilerplate: what every student was
given does not count as shared. An exercise whose published answer has fewer than ``min_chars``
characters of normalised code beyond its stub is skipped and said so: in a one-line answer
(``make_causal_mask``) honest students converge. The report never changes a grade: it lists pairs
for the instructor to read.

Reads what ``transformer-course grade`` keeps of the class: ``OUT/nbgrader/submitted/<student>/
<assignment>/<notebook>.ipynb``. Writes ``OUT/similarity/``: ``index.html`` (the groups, each student's
closest source, then ranked pairs), ``students.csv``, ``pairs.csv``, ``settings.json`` (the threshold and
minimum length of this run, which later runs and ``transformer-course report`` use unless told otherwise),
one page per grouped student and one side-by-side page per pair above the threshold.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import io
import itertools
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import numpy as np

from transformer_course.grading.output.spreadsheet import write_rows
from transformer_course.instructors.deadlines import instant, show  # in the due date's zone, as results.json keeps it
from transformer_course.instructors.equivalent import as_written as canonical  # the fingerprints' layout
from transformer_course.instructors.roster import SORTABLE, label, label_html, name_html

SOLUTION = "published solution"
# Measured on the test class of `make bench` (bench.similarity_figures): every copier of the published
# solution and of another student is at or above it, no honest pair of an exercise above the minimum length.
THRESHOLD = 0.75
MIN_CHARS = 60  # characters of an answer's normalised code in fingerprints its stub does not have
K = 25  # characters per fingerprint (copydetect's default noise threshold)
TIE = 0.05  # evidence this close names the published solution as the source (students())
# A student's evidence (students()) from which they are grouped with a source; measured as THRESHOLD is.
STUDENT_THRESHOLD = 0.6
TELLING = 0.5  # an exercise's excess from which the report lists it as evidence
FLOOR = 0.02  # share of tokens that differ at or below which two answers count as the same (Exercise.excess)


@dataclass
class Pair:
    exercise: str
    assignment: str
    a: str
    b: str
    similarity: float  # the larger of the two shares: how much of one answer the other holds
    shares: tuple[float, float]
    slices: tuple[np.ndarray, np.ndarray] = field(repr=False)
    code: tuple[str, str] = field(repr=False)  # the two cells as handed in


@dataclass
class Exercise:
    """Every pair of attempted answers to one exercise, short ones included, compared at two levels
    (:data:`LEVELS`): the tokens as written (names kept; comments, docstrings and layout dropped) and the
    tokens of the equivalent form (:mod:`.equivalent`: names and spellings of one operation unified)."""
    similarity: dict[str, dict[tuple[str, str], float]]  # level -> (a, b) -> difflib's ratio, 0-1
    typical: dict[str, float]  # level -> the median over the pairs: what answers share without copying
    weight: float  # tokens of the published answer's equivalent form: a long exercise is more evidence

    def excess(self, a: str, b: str) -> float | None:
        """How far above what is typical the pair is, 0-1, at the level where it is furthest; None where one
        of them did not attempt the exercise. Measured on the share of tokens that differ, on a log scale:
        0 at the typical share, 1 at :data:`FLOOR` or less (a copy), half-way at the geometric mean. Two
        honest answers in one style differ by a tenth of their tokens; a disguised copy by a few in a hundred."""
        found = None
        for level, table in self.similarity.items():
            value = table.get((a, b), table.get((b, a)))
            if value is None:
                return None
            typical = 1 - self.typical.get(level, 1.0)
            if typical > FLOOR:
                share = math.log(typical / max(1 - value, FLOOR)) / math.log(typical / FLOOR)
                found = max(found or 0.0, min(1.0, max(0.0, share)))
        return found or 0.0


@dataclass
class Evidence:
    """One student's answers across the course against one source's (a classmate or the published solution)."""
    student: str
    source: str
    score: float  # the weighted mean of the exercises' excess (Exercise.excess): 0 typical, 1 identical
    compared: int  # exercises both answered
    exercises: list[tuple[str, float]]  # (exercise, excess) of each exercise both answered, most first

    @property
    def standing_out(self) -> list[str]:
        """The exercises well above what the class typically shares (excess >= :data:`TELLING`)."""
        return [exercise for exercise, excess in self.exercises if excess >= TELLING]


@dataclass
class Report:
    pairs: list[Pair]  # every pair compared, most similar first
    skipped: dict[str, float]  # exercise -> normalised characters of its published answer (below the minimum)
    threshold: float
    min_chars: int
    short: dict[str, list[str]] = field(default_factory=dict)  # exercise -> answers below the minimum
    unattempted: dict[str, list[str]] = field(default_factory=dict)  # exercise -> answers left as the stub
    submitted: dict[tuple[str, str], str] = field(default_factory=dict)  # (student, assignment) -> when (ISO 8601)
    exercises: dict[str, Exercise] = field(default_factory=dict)  # every exercise, short ones included
    student_threshold: float = STUDENT_THRESHOLD
    answers: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)  # exercise -> who -> cell
    stubs: dict[str, str] = field(default_factory=dict, repr=False)  # exercise -> the release's cell
    evidence: dict[tuple[str, str], Evidence] | None = field(default=None, repr=False)  # see _evidence()
    names: dict[str, str] = field(default_factory=dict)  # student id -> name, shown beside the id (roster.py)

    def who(self, student: str) -> str:
        """A student (or the published solution) on a page: the name beside the id, escaped."""
        return html.escape(student) if student == SOLUTION else label_html(student, self.names)

    def name_cell(self, student: str) -> str:
        """The cell of a sortable table's name column ("" where no name is known)."""
        return f"<td>{name_html(student, self.names)}</td>" if self.names else ""

    @property
    def flagged(self) -> list[Pair]:
        return [p for p in self.pairs if p.similarity >= self.threshold]

    def students(self) -> set[str]:
        """Everyone with an attempted answer (the published solution included)."""
        return {n for e in self.exercises.values() for table in e.similarity.values() for pair in table for n in pair}


def answer_cells(path: Path) -> dict[str, str]:
    """``grade_id -> code`` of a notebook's answer cells (nbgrader ``solution`` cells); {} where the
    notebook cannot be read (a cut-off upload is graded as such, and has no answers to compare)."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 (not a notebook: nothing to compare)
        return {}
    found = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("solution") and meta.get("grade_id"):
            found[str(meta["grade_id"])] = cell.get("source", "")
    return found


def _fingerprint(code: str, boilerplate: np.ndarray | None = None):  # -> copydetect.CodeFingerprint
    from copydetect import CodeFingerprint

    return CodeFingerprint("answer.py", K, 1, boilerplate=boilerplate, fp=io.StringIO(canonical(code)),
                           language="python")


def _normalised(code: str) -> str:
    from copydetect.utils import filter_code

    return filter_code(code, "answer.py", "python")[0]


def unanswered(code: str, stub: str) -> bool:
    """Whether ``code`` holds nothing of the student's own beyond the release's answer cell ``stub``: empty,
    the stub as released (its ``raise NotImplementedError(...)`` included) with comments, docstrings or
    layout changed or lines deleted, or ``pass`` in their place. Such an exercise is left out of the
    comparisons (two stubs are identical; a stub against an answer says nothing of either student). Tokens
    compared as written (docstrings dropped) and, for a cell that does not parse (a method's body emptied),
    as they stand."""
    from transformer_course.instructors.equivalent import _positioned, own, tokens

    def raw(text: str) -> list[str]:
        return [t for t, _, _ in _positioned(text)] or text.split()

    for found, given in ((tokens(code, equivalent=False), tokens(stub, equivalent=False)), (raw(code), raw(stub))):
        mine = own(found, given if stub.strip() else [])
        if all(t in ("pass", ";") for t, m in zip(found, mine, strict=True) if m):
            return True
    return False


def compare(answers: dict[str, dict[str, str]], stubs: dict[str, str], solutions: dict[str, str],
            assignment_of: dict[str, str], threshold: float = THRESHOLD, min_chars: int = MIN_CHARS) -> Report:
    """Every pair of answers to each exercise, and each answer against the published solution.

    Args:
        answers: exercise -> {student: answer cell code}.
        stubs: exercise -> the release's answer cell (boilerplate; an answer equal to it is not attempted).
        solutions: exercise -> the published solution's answer cell.
        assignment_of: exercise -> its assignment (notebook).
    """
    if not 0 < threshold <= 1 or min_chars < 0:
        raise ValueError(f"the threshold is a share of an answer, 0 < threshold <= 1 (e.g. 0.75 for 75%), and the "
                         f"minimum length a number of characters >= 0; got {threshold!r} and {min_chars!r}")
    pairs, skipped, short, unattempted, whole = [], {}, {}, {}, {}
    for exercise in sorted(answers):
        whole[exercise] = _equivalent(answers[exercise], stubs.get(exercise, ""), solutions.get(exercise))
    for exercise in sorted(answers):
        stub = stubs.get(exercise, "")
        boilerplate = np.array(sorted(_fingerprint(stub).hashes)) if stub else None
        solution = solutions.get(exercise)
        if solution is not None:  # characters of its normalised code in fingerprints the stub does not have
            beyond = float(_fingerprint(solution, boilerplate).token_coverage)
            if beyond < min_chars:
                skipped[exercise] = beyond
                continue
        attempted = {s: code for s, code in answers[exercise].items() if not unanswered(code, stub)}
        if untouched := sorted(set(answers[exercise]) - set(attempted)):
            unattempted[exercise] = untouched
        if solution is not None:
            attempted[SOLUTION] = solution
        prints = {s: _fingerprint(code, boilerplate) for s, code in attempted.items()}
        for student in [s for s, f in prints.items() if f.token_coverage < min_chars]:
            del prints[student]  # too little of its own to compare: honest answers converge there
            short.setdefault(exercise, []).append(student)
        for a, b in itertools.combinations(sorted(prints, key=lambda s: (s == SOLUTION, s)), 2):
            pairs.append(_pair(exercise, assignment_of.get(exercise, ""), a, b, prints[a], prints[b],
                               (attempted[a], attempted[b])))
    pairs.sort(key=lambda p: (-p.similarity, p.exercise, p.a, p.b))
    codes = {e: dict(by) | ({SOLUTION: solutions[e]} if e in solutions else {}) for e, by in answers.items()}
    return Report(pairs, skipped, threshold, min_chars, short, unattempted, exercises=whole, answers=codes,
                  stubs={e: stubs.get(e, "") for e in answers})


LEVELS = ("as written", "equivalent form")


def _equivalent(answers: dict[str, str], stub: str, solution: str | None) -> Exercise:
    """Every pair of the attempted ``answers`` (and the published ``solution``) to one exercise, at each of
    :data:`LEVELS` (difflib's ratio of the two token lists: the share of tokens in common), each level's
    typical similarity the median of its pairs."""
    import difflib

    from transformer_course.instructors.equivalent import given, own, tokens

    answers = {s: code for s, code in answers.items() if not unanswered(code, stub)}  # the stub: not compared
    stub = given(stub)
    codes = dict(answers) | ({SOLUTION: solution} if solution is not None else {})
    names = sorted(codes, key=lambda s: (s == SOLUTION, s))
    similarity, typical, weight = {}, {}, 1
    for level, equivalent in zip(LEVELS, (False, True), strict=True):
        kept = tokens(stub, equivalent)
        forms = {s: [t for t, m in zip(found, own(found, kept), strict=True) if m]
                 for s in names for found in [tokens(codes[s], equivalent)]}
        forms = {s: t for s, t in forms.items() if t or s == SOLUTION}  # nothing of their own: not attempted
        table = {(a, b): difflib.SequenceMatcher(None, forms[a], forms[b], autojunk=False).ratio()
                 for a, b in itertools.combinations([s for s in names if s in forms], 2)}
        similarity[level] = table
        typical[level] = float(np.median(list(table.values()))) if table else 1.0
        if equivalent:
            weight = len(forms.get(SOLUTION) or max(forms.values(), key=len, default=[]))
    return Exercise(similarity, typical, float(weight or 1))


def students(report: Report) -> list[Evidence]:
    """Each student's closest source across the course: for every classmate and the published solution,
    the mean over the exercises both answered of how far their answers are above what the class's answers
    to that exercise typically share (:class:`Exercise`), weighted by the exercise's length. Many short
    exercises copied together add up where each alone says nothing. The published solution is named where
    it is within :data:`TIE` of the closest, or itself reaches the student threshold (students who copied
    it resemble each other as much as they resemble it). Most evidence first."""
    by_student: dict[str, list[Evidence]] = {}
    for (student, _), found in sorted(_evidence(report).items()):
        if student != SOLUTION:
            by_student.setdefault(student, []).append(found)
    chosen = []
    for best in by_student.values():
        top = max(e.score for e in best)
        pick = next((e for e in best if e.source == SOLUTION
                     and (e.score >= top - TIE or e.score >= report.student_threshold)), None)
        chosen.append(pick or max(best, key=lambda e: (e.score, e.source)))
    return sorted(chosen, key=lambda e: (-e.score, e.student))


def evidence(report: Report, student: str, source: str) -> Evidence | None:
    """``student``'s answers against ``source``'s across the course (see :func:`students`); None where
    they answered no exercise in common."""
    return _evidence(report).get((student, source))


def _evidence(report: Report) -> dict[tuple[str, str], Evidence]:
    """(student, source) -> :class:`Evidence`, both ways round, for every two who answered an exercise in
    common (computed once per report)."""
    if report.evidence is None:
        sums: dict[tuple[str, str], list] = {}  # -> [weighted excess, weights, compared, telling]
        for exercise, table in sorted(report.exercises.items()):
            for a, b in next(iter(table.similarity.values()), {}):
                excess = table.excess(a, b) or 0.0
                for key in ((a, b), (b, a)):
                    found = sums.setdefault(key, [0.0, 0.0, 0, []])
                    found[0] += table.weight * excess
                    found[1] += table.weight
                    found[2] += 1
                    found[3].append((exercise, excess))
        report.evidence = {key: Evidence(*key, total / weights, compared, sorted(telling, key=lambda t: (-t[1], t[0])))
                           for key, (total, weights, compared, telling) in sums.items() if weights}
    return report.evidence


def groups(report: Report) -> list[tuple[str, list[Evidence]]]:
    """The students whose evidence reaches the report's student threshold, grouped by common source: one
    group around the published solution, then groups of classmates (a student, their source, and whoever
    names either of them), largest first. A group is named by its source: the solution, or the classmates
    in it (which of two classmates copied the other is not something the code can say)."""
    flagged = [e for e in students(report) if e.score >= report.student_threshold]
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent.setdefault(name, name) != name:
            name = parent[name]
        return name

    for e in flagged:
        if e.source != SOLUTION:
            parent[root(e.student)] = root(e.source)
    grouped: dict[str, list[Evidence]] = {}
    for e in flagged:
        grouped.setdefault(SOLUTION if e.source == SOLUTION else "classmates:" + root(e.student), []).append(e)
    named = []
    for key, members in grouped.items():
        if key == SOLUTION:
            named.append((SOLUTION, members))
            continue
        named.append((", ".join(sorted({n for e in members for n in (e.student, e.source)})), members))
    return sorted(named, key=lambda g: (g[0] != SOLUTION, -len(g[1]), g[0]))


def _pair(exercise: str, assignment: str, a: str, b: str, fa, fb, code: tuple[str, str]) -> Pair:
    """``code``: the two cells as handed in (the fingerprints' slices are in their :func:`canonical` form)."""
    from copydetect import compare_files

    if not fa.hashes or not fb.hashes:  # nothing beyond the stub
        empty = np.array([[], []], dtype=int)
        return Pair(exercise, assignment, a, b, 0.0, (0.0, 0.0), (empty, empty), code)
    _, shares, slices = compare_files(fa, fb)
    shares = (float(shares[0]), float(shares[1]))
    return Pair(exercise, assignment, a, b, max(shares), shares, slices, code)


def course_cells(repo) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:  # noqa: ANN001 (layout.Repo)
    """``(stubs, solutions, assignment_of)``: each exercise's answer cell in the release and in the
    published solutions, and its assignment."""
    stubs, solutions, assignment_of = {}, {}, {}
    for assignment in repo.assignments():
        name = f"{assignment.notebook}.ipynb"
        for exercise, code in answer_cells(repo.course / assignment.name / name).items():
            stubs[exercise], assignment_of[exercise] = code, assignment.name
        solutions.update(answer_cells(repo.solutions / name))
    return stubs, solutions, assignment_of


SETTINGS = "settings.json"  # under OUT/similarity: the threshold and minimum length the instructor chose


def settings(out: Path, threshold: float | None = None, min_chars: int | None = None) -> tuple[float, int]:
    """``(threshold, min_chars)``: those given, else the ones kept in ``OUT/similarity/settings.json`` by an
    earlier run of the command, else the defaults."""
    kept: dict = {}
    with contextlib.suppress(OSError, ValueError):
        found = json.loads((out / "similarity" / SETTINGS).read_text())
        kept = found if isinstance(found, dict) else {}
    threshold = threshold if threshold is not None else kept.get("threshold", THRESHOLD)
    min_chars = min_chars if min_chars is not None else kept.get("min_chars", MIN_CHARS)
    return float(threshold), int(min_chars)


def from_class(out: Path, repo=None, threshold: float | None = None,  # noqa: ANN001 (layout.Repo)
               min_chars: int | None = None, names: dict[str, str] | None = None) -> Report:
    """The report of a graded class: the answers kept in ``OUT/nbgrader/submitted``, at the settings
    given, else at those kept in ``OUT`` (:func:`settings`); ``names``: student id -> name (None: those
    ``grade`` kept in ``OUT/roster.csv``, :func:`.roster.for_run`)."""
    from transformer_course.instructors import roster
    from transformer_course.layout import Repo

    threshold, min_chars = settings(out, threshold, min_chars)
    repo = repo or Repo()
    answers: dict[str, dict[str, str]] = {}
    stubs, solutions, assignment_of = course_cells(repo)
    for assignment in repo.assignments():
        name = f"{assignment.notebook}.ipynb"
        for path in sorted((out / "nbgrader" / "submitted").glob(f"*/{assignment.name}/{name}")):
            student = path.parent.parent.name
            for exercise, code in answer_cells(path).items():
                if exercise in stubs:
                    answers.setdefault(exercise, {})[student] = code
    report = compare(answers, stubs, solutions, assignment_of, threshold, min_chars)
    report.names = roster.for_run(out=out) if names is None else names
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):  # times only where the run had deadlines
        for r in json.loads((out / "results.json").read_text()):
            if r.get("submitted_at"):
                report.submitted[(r["student_id"], r["assignment"])] = r["submitted_at"]
    return report


PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title><style>
body {{ font-family: sans-serif; margin: 2em; }} table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ccc; padding: .3em .6em; vertical-align: top; text-align: left; }}
pre {{ font-size: 13px; white-space: pre-wrap; }} .hl {{ background: #ffd28a; }}
.cols {{ display: flex; gap: 1em; }} .cols > div {{ flex: 1; min-width: 0; }}
</style></head><body>{body}</body></html>"""


def page_name(pair: Pair) -> str:
    """The pair's page: named after the exercise and the two students, the same in every run."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{pair.exercise}--{pair.a}--{pair.b}") + ".html"


def write(report: Report, folder: Path) -> Path:
    """``index.html``, ``pairs.csv`` and a page per flagged pair into ``folder`` (an earlier run's
    pages removed); returns the index."""
    from transformer_course.instructors.equivalent import side_by_side

    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.html"):
        old.unlink()
    (folder / SETTINGS).write_text(json.dumps({"threshold": report.threshold, "min_chars": report.min_chars}) + "\n")
    write_rows(folder / "pairs.csv", [
        ["exercise", "assignment", "a", "b", "similarity", "share_of_a", "share_of_b", "flagged"],
        *[[p.exercise, p.assignment, p.a, p.b, f"{p.similarity:.3f}", f"{p.shares[0]:.3f}", f"{p.shares[1]:.3f}",
           int(p.similarity >= report.threshold)] for p in report.pairs]])
    rows = []
    for p in report.flagged:
        columns = []
        views = side_by_side(*p.code, report.stubs.get(p.exercise, ""), equivalent=False)
        for who, code, shown, share in zip((p.a, p.b), p.code, views, p.shares, strict=True):
            when = report.submitted.get((who, p.assignment))
            columns.append(f"<div><h3>{report.who(who)}: {share:.0%} of it matched</h3>"
                           + (f"<p>handed in {html.escape(show(when))}</p>" if when else "")
                           + f"<pre>{shown}</pre><details><summary>the cell as handed in</summary>"
                           f"<pre>{html.escape(code)}</pre></details></div>")
        (folder / page_name(p)).write_text(PAGE.format(
            title=html.escape(f"{p.exercise}: {p.a} and {p.b}"),
            body=f"<p><a href='index.html'>All pairs</a></p><h2>{html.escape(p.exercise)} "
                 f"({html.escape(p.assignment)}): {report.who(p.a)} and {report.who(p.b)}, "
                 f"similarity {p.similarity:.0%}</h2>"
                 "<p>Each answer is shown as Python lays it out (<code>ast</code>: comments, docstrings and "
                 "layout removed), the tokens that match the other's highlighted (whole tokens; names and strings "
                 "did not count). What the release's stub already held is never highlighted. Which of the two came "
                 "first is not something the code can say: the hand-in times are a hint.</p>"
                 f"<div class='cols'>{''.join(columns)}</div>"))
        rows.append(f"<tr><td>{p.similarity:.0%}</td><td>{html.escape(p.exercise)}</td><td>{report.who(p.a)}</td>"
                    f"<td>{report.who(p.b)}</td><td><a href='{page_name(p)}'>side by side</a></td></tr>")
    by_pair: dict[tuple[str, str], list[Pair]] = {}
    for p in report.flagged:
        by_pair.setdefault((p.a, p.b), []).append(p)
    pair_rows = "".join(
        f"<tr><td>{report.who(a)}</td><td>{report.who(b)}</td><td>{len(found)}</td>"
        f"<td>{html.escape(', '.join(p.exercise for p in found))}</td></tr>"
        for (a, b), found in sorted(by_pair.items(), key=lambda item: (-len(item[1]), item[0])))
    skipped = "".join(f"<li><code>{html.escape(e)}</code>: the published answer has {n:.0f} characters of its "
                      "own</li>" for e, n in sorted(report.skipped.items()))
    short = "".join(f"<li><code>{html.escape(e)}</code>: {', '.join(map(report.who, who))}</li>"
                    for e, who in sorted(report.short.items()))
    untouched = "".join(f"<li><code>{html.escape(e)}</code>: {', '.join(map(report.who, who))}</li>"
                        for e, who in sorted(report.unattempted.items()))
    ranked = students(report)
    write_rows(folder / "students.csv", [
        ["student", "source", "evidence", "exercises_compared", "exercises_standing_out", "grouped"],
        *[[e.student, e.source, f"{e.score:.3f}", e.compared, len(e.standing_out),
           int(e.score >= report.student_threshold)] for e in ranked]])
    for e in ranked:
        if e.score >= report.student_threshold:
            (folder / evidence_page(e)).write_text(_evidence_page(report, e))
    source_rows = "".join(
        f"<tr><td>{html.escape(e.student)}</td>{report.name_cell(e.student)}<td>{report.who(e.source)}</td>"
        f"<td data-sort='{e.score:.4f}'>{e.score:.0%}</td>"
        f"<td>{e.compared}</td><td>{len(e.standing_out)}</td><td>"
        + (f"<a href='{evidence_page(e)}'>side by side</a>" if e.score >= report.student_threshold else "-")
        + "</td></tr>" for e in ranked)
    group_rows = "".join(
        "<h3>" + ("Around the published solution" if name == SOLUTION else "Classmates: "
                  + group_html(name, report.names)) + "</h3><ul>"
        + "".join(f"<li>{report.who(e.student)} ({e.score:.0%} with {report.who(e.source)}; stands out on "
                  f"{len(e.standing_out)} of {e.compared} exercises compared, those both answered of "
                  f"{len(report.exercises)}: "
                  f"<a href='{evidence_page(e)}'>side by side</a>)</li>"
                  for e in members) + "</ul>" for name, members in groups(report))
    grouped = sum(len(members) for _, members in groups(report))
    body = (f"<h1>Similar answers</h1><p>{grouped} student(s) whose answers across the course resemble one "
            f"source's at or above {report.student_threshold:.0%} evidence (grouped below); "
            f"{len(report.flagged)} pair(s) of answers at or above "
            f"{report.threshold:.0%} similarity, of {len(report.pairs)} compared (copydetect's fingerprints over "
            "code laid out by Python's ast: renamed variables, comments and layout do not count); "
            f"{len(report.skipped)} exercise(s) not compared pair by pair (their published answer is too short: "
            "below), each of them still counted in the students' evidence. A lead to read, not a verdict: "
            "grades are unchanged.</p>"
            "<h2>Students grouped by source</h2><p>Each student's answers to every exercise, short ones included, "
            "against each classmate's and the published solution's: per exercise, how far the two are above what "
            "the class's answers to it typically share, as written and in an equivalent form (names, and the "
            "spellings of one operation such as <code>a @ b</code> and <code>torch.matmul(a, b)</code>, "
            "unified; helpers inlined), then the mean over the exercises weighted by their length. Many short "
            "exercises copied together add up where each alone says nothing. An exercise where either of the two "
            "still holds the release's stub (or nothing of their own beyond it: empty, comments, <code>pass</code>) "
            "is left out of that pair's mean: a student who copied a few exercises and left the rest blank is "
            "compared on those few (the number of exercises compared is given with each). Students who copied the "
            "published solution are grouped around it; two classmates are grouped together (which of them wrote it "
            f"first the code cannot say: the hand-in times are a hint).</p>{group_rows or '<p>none</p>'}"
            "<h2>By student: the closest source</h2><p>Every student, most evidence first: 0% is what the class "
            "typically shares, 100% identical answers throughout the exercises compared (those both answered, "
            f"of {len(report.exercises)}; a student with none answered in common with anyone has no row).</p>"
            f"<table class=sortable><thead><tr><th>student</th>{'<th>name</th>' * bool(report.names)}"
            "<th>closest source</th><th>evidence</th><th>exercises compared</th>"
            f"<th>exercises that stand out</th><th></th></tr></thead><tbody>{source_rows}</tbody></table>"
            "<h2>By pair of students</h2><table class=sortable><thead><tr><th>student</th><th>with</th>"
            f"<th>exercises flagged</th><th>which</th></tr></thead><tbody>{pair_rows}</tbody></table>"
            "<h2>By exercise, most similar first</h2><table class=sortable><thead><tr><th>similarity</th>"
            f"<th>exercise</th><th>student</th><th>with</th><th></th></tr></thead><tbody>{''.join(rows)}</tbody>"
            "</table>"
            f"<h2>Not compared</h2><p>Where an answer has under {report.min_chars} characters of normalised code "
            "of its own (beyond the stub), honest answers converge. Exercises whose published answer is that "
            f"short:</p><ul>{skipped or '<li>none</li>'}</ul><p>Answers that short, by exercise:</p>"
            f"<ul>{short or '<li>none</li>'}</ul><p>Answers left as the stub (not attempted):</p>"
            f"<ul>{untouched or '<li>none</li>'}</ul>{SORTABLE}")
    index = folder / "index.html"
    index.write_text(PAGE.format(title="Similar answers", body=body))
    return index


def evidence_page(found: Evidence) -> str:
    """The page of one student's evidence against their source, the same in every run."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"student--{found.student}--{found.source}") + ".html"


def _evidence_page(report: Report, found: Evidence) -> str:
    """Each exercise both answered, those furthest above what the class typically shares first: the two
    answers side by side in their equivalent form (the tokens they share beyond the stub highlighted), the
    cells as handed in below."""
    from transformer_course.instructors.equivalent import side_by_side

    parts = []
    for exercise, excess in found.exercises:
        codes = report.answers.get(exercise, {})
        a, b = codes.get(found.student, ""), codes.get(found.source, "")
        shown = side_by_side(a, b, report.stubs.get(exercise, ""))
        columns = "".join(
            f"<div><h4>{report.who(who)}</h4><pre>{view}</pre><details><summary>the cell as handed in</summary>"
            f"<pre>{html.escape(code)}</pre></details></div>"
            for who, view, code in zip((found.student, found.source), shown, (a, b), strict=True))
        typical = report.exercises[exercise].typical
        parts.append(f"<h3>{html.escape(exercise)}: {excess:.0%} of the way from typical to identical</h3><p>typical "
                     "similarity of the class's answers: " + ", ".join(f"{v:.0%} {k}" for k, v in typical.items())
                     + f"</p><div class='cols'>{columns}</div>")
    when = [show(w) for w in sorted({report.submitted[k] for k in report.submitted
                                      if k[0] in (found.student, found.source)}, key=instant)]
    return PAGE.format(
        title=html.escape(f"{found.student} and {found.source}"),
        body=f"<p><a href='index.html'>All students</a></p><h2>{report.who(found.student)} and "
             f"{report.who(found.source)}: {found.score:.0%} evidence over the {found.compared} of "
             f"{len(report.exercises)} exercise{'' if found.compared == 1 else 's'} both answered</h2>"
             "<p>Exercises where either of them left the release's stub (or nothing of their own beyond it) are "
             "not compared and not counted.</p>"
             "<p>Each answer in its equivalent form: docstrings and comments dropped, names and strings as "
             "placeholders (<code>v</code>, <code>'s'</code>), one spelling per operation "
             "(<code>op_matmul</code> for <code>@</code>, <code>torch.matmul</code> and <code>.bmm</code>), "
             "helpers inlined. Highlighted: the tokens that match the other answer's, beyond what the stub gave "
             "both." + (f" Hand-in times: {html.escape(', '.join(when))}." if when else "") + "</p>"
             + "".join(parts))


def group_html(name: str, names: dict[str, str]) -> str:
    """A group's name on a page (:func:`groups`: the published solution, or its classmates' ids joined by
    ", "), each classmate with their name."""
    if name == SOLUTION:
        return html.escape(name)
    return ", ".join(label_html(student, names) for student in name.split(", "))


def summary(report: Report, most: int = 20) -> str:
    """The first lines of the report: the groups of students, counts and the ``most`` most similar pairs."""
    lines = [f"{'around the ' + name if name == SOLUTION else 'classmates ' + name}: "
             + ", ".join(f"{label(e.student, report.names)} {e.score:.0%} over {e.compared} exercise(s)"
                         for e in members)
             for name, members in groups(report)]
    lines += [f"{len(report.flagged)} pair(s) at or above {report.threshold:.0%} similarity "
              f"({len(report.pairs)} compared; {len(report.skipped)} short exercises not compared pair by pair)"]
    lines += [f"  {p.similarity:4.0%}  {p.exercise:30s} {label(p.a, report.names)} ~ {label(p.b, report.names)}"
              for p in report.flagged[:most]]
    if len(report.flagged) > most:
        lines.append(f"  ... and {len(report.flagged) - most} more in similarity/index.html")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options (``transformer-course similarity`` and ``python -m`` this module)."""
    parser.add_argument("out", help="the --out folder of `transformer-course grade`")
    parser.add_argument("--threshold", type=float, default=None,
                        help=f"similarity (0-1) from which a pair is listed (default {THRESHOLD}, measured by "
                             "make bench; kept in OUT/similarity/ for later runs and `report`)")
    parser.add_argument("--min-chars", type=int, default=None,
                        help=f"answers and exercises with fewer characters of their own normalised code are not "
                             f"compared (default {MIN_CHARS}: short answers converge; kept as the threshold is)")
    parser.add_argument("--roster", default=None, metavar="FILE.csv",
                        help="students' names (columns student_id,name) shown beside their ids; default: those "
                             "`grade` kept in OUT/roster.csv")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="transformer-course similarity", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """The command, on parsed arguments: writes ``OUT/similarity/``; 2 on an ungraded folder, a bad option or
    a roster that cannot be read."""
    from transformer_course.instructors import roster

    out = Path(args.out)
    if not (out / "nbgrader" / "submitted").is_dir():
        print(f"transformer-course similarity: error: {out} holds no graded class (no nbgrader/submitted/); "
              "run `transformer-course grade SUBMITTED --out OUT` first", file=sys.stderr)
        return 2
    try:
        names = roster.for_run(out=out, roster=Path(args.roster) if getattr(args, "roster", None) else None)
        report = from_class(out, threshold=args.threshold, min_chars=args.min_chars, names=names)
    except ValueError as exc:  # RosterError too
        print(f"transformer-course similarity: error: {exc}", file=sys.stderr)
        return 2
    index = write(report, out / "similarity")
    print(summary(report))
    print(f"similarity: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
