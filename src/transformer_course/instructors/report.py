"""``transformer-course report OUT``: one static HTML page about a graded class, for an
instructor who would rather look than read CSVs.

Built from ``OUT/results.json`` (no re-grading), into ``OUT/report/``: ``index.html`` and
its figures as PNG. Per assignment, the distribution of final scores (after late penalties, the raw
score beside it where they differ) and a table of them; per exercise, the share of
students at full marks and the mean; the named mistakes ranked by how many students made
them, with their ids; who is missing, crashed or could not be graded, and why; and the
exercises where students lost points without a named mistake (where the notebook's text or
a test may need work).
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from transformer_course.instructors import roster
from transformer_course.instructors.deadlines import show
from transformer_course.instructors.roster import label_html, name_html
from transformer_course.words import count

# A feedback line reads "<what was checked>: <the mistake> (see section N, '...')", sometimes
# followed by " Note: ..." about earlier exercises. These mark a loss that names no mistake.
_UNNAMED = ("differs from the expected values", "max abs error", "raised ", "timed out", "did not finish")
_NOT_ATTEMPTED = "not attempted"


@dataclass(frozen=True)
class Loss:
    student_id: str
    assignment: str
    exercise: str
    feedback: str


def mistake_of(feedback: str) -> str | None:
    """The named mistake in a feedback line, or None when the line names none."""
    text = re.sub(r"\s*\[also failed: [^\]]*\]", "", feedback.split(" Note: ", 1)[0]).strip()
    if not text or text.startswith(_NOT_ATTEMPTED) or any(marker in text for marker in _UNNAMED):
        return None
    text = re.split(r" \(see section \d+", text, maxsplit=1)[0]
    if ": " in text:  # drop "<what was checked>: ", which differs between inputs of one check
        text = text.split(": ", 1)[1]
    return text.rstrip(" .") or None


def _load(out: Path) -> list[dict]:
    path = out / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run `transformer-course grade SUBMITTED --out {out}` first")
    return json.loads(path.read_text())


def scores(result: dict) -> tuple[float, float, float]:
    """A notebook's (final score, raw score, maximum): raw = the autograded points after the instructor's
    overrides and extra credit (results.json's ``score``), final = raw less the late penalty, never below 0
    (its ``final_score``); from the exercises where an older results.json has neither."""
    raw = result.get("score", sum(e["score"] for e in result["exercises"]))
    final = result.get("final_score", max(0.0, raw - result.get("late_penalty", 0.0)))
    return final, raw, sum(e["max_score"] for e in result["exercises"])


def _written(result: dict) -> str:
    """The answers in words of a notebook, for the Scores table ("" where it has none to grade)."""
    status, top = result.get("manual_status"), result.get("manual_max_score") or 0
    if status == "graded":
        return f"; written {result['manual_score']:g} / {top:g}"
    return f"; written awaiting (of {top:g})" if status == "awaiting" else ""


def score_points(results: list[dict]) -> list[tuple[str, float, float, str]]:
    """What the scores figure plots, per notebook: (assignment, final %, raw %, status)."""
    points = []
    for r in results:
        if r["exercises"]:
            final, raw, top = scores(r)
            points.append((r["assignment"], 100 * final / max(top, 1e-9), 100 * raw / max(top, 1e-9), r["status"]))
    return points


def _figures(results: list[dict], folder: Path) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", palette="colorblind")
    assignments = sorted({r["assignment"] for r in results})
    figures = []
    # 1. Final scores per assignment (after late penalties), as a percentage of the maximum: one dot per student;
    # where a penalty took points off, the raw score is a hollow circle above the dot.
    points = score_points(results)
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(assignments)), 4))
    label = "final score (% of maximum)"
    data = {"assignment": [a for a, *_ in points], label: [f for _, f, _, _ in points],
            "status": [t for *_, t in points]}
    sns.boxplot(data=data, x="assignment", y=label, order=assignments, color="0.9", ax=ax, showfliers=False)
    sns.stripplot(data=data, x="assignment", y=label, hue="status", order=assignments, ax=ax, size=6, jitter=0.2)
    penalised = [(assignments.index(a), f, r) for a, f, r, _ in points if r > f]
    if penalised:
        ax.scatter([x for x, _, _ in penalised], [r for _, _, r in penalised], s=60, facecolors="none",
                   edgecolors="0.35", label="before the late penalty", zorder=3)
        ax.vlines([x for x, _, _ in penalised], [f for _, f, _ in penalised], [r for _, _, r in penalised],
                  colors="0.6", linestyles=":", zorder=2)
        ax.legend(fontsize=8)
    ax.set(ylim=(-5, 105), title="Final scores per assignment (one dot per student)")
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(folder / "scores.png", dpi=110)
    plt.close(fig)
    figures.append(("scores.png", "Final scores per assignment, after late penalties, one dot per student (missing "
                                  "notebooks score 0; a hollow circle is the score before a late penalty)"))
    # 2. Per exercise: the share of graded students at full marks.
    full: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for r in results:
        if r["status"] == "graded":
            for e in r["exercises"]:
                full[(r["assignment"], e["exercise"])].append(e["score"] >= e["max_score"])
    keys = sorted(full, key=lambda k: (k[0], 0))
    fig, ax = plt.subplots(figsize=(7, max(3, 0.28 * len(keys) + 1)))
    shares = [100 * sum(full[k]) / len(full[k]) for k in keys]
    colours = [sns.color_palette()[assignments.index(k[0]) % 10] for k in keys]
    ax.barh([f"{k[0][:2]} {k[1]}" for k in keys], shares, color=colours)
    ax.invert_yaxis()
    ax.set(xlim=(0, 100), xlabel="graded students at full marks (%)", ylabel="exercise",
           title="Exercises: share at full marks")
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    fig.savefig(folder / "exercises.png", dpi=110)
    plt.close(fig)
    figures.append(("exercises.png", "Per exercise, the share of graded students at full marks"))
    return figures


def _table(header: list[str], rows: list[list[str]], sortable: bool = False) -> str:
    """An HTML table of ``rows`` (cells already escaped); ``sortable``: its headings sort it when clicked
    (:data:`.roster.SORTABLE`)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{' class=sortable' * sortable}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _similarity_section(out: Path, names: dict[str, str]) -> str:
    """The similarity report of the class (``OUT/similarity/``), summed up with a link."""
    from transformer_course.instructors import similarity

    if not (out / "nbgrader" / "submitted").is_dir():
        return "<p>Not compared: no graded answers kept (<code>OUT/nbgrader/submitted/</code>).</p>"
    report = similarity.from_class(out, names=names)
    similarity.write(report, out / "similarity")
    rows = [[f"{p.similarity:.0%}", html.escape(p.exercise), label_html(p.a, names), label_html(p.b, names)]
            for p in report.flagged[:20]]  # the most similar: the rest are on the similarity page
    grouped = [[similarity.group_html(name, names), ", ".join(f"{label_html(e.student, names)} ({e.score:.0%})"
                                                              for e in members)]
               for name, members in similarity.groups(report)]
    return (f"<p>Students whose answers across the course resemble one source's (evidence at or above "
            f"{report.student_threshold:.0%}), grouped by source:</p>"
            + (_table(["source", "students (evidence)"], grouped) if grouped else "<p>none</p>")
            + f"<p>{count(len(report.flagged), 'pair')} of answers at or above {report.threshold:.0%} similarity "
            f"(copydetect's fingerprints, names and layout normalised; "
            f"{count(len(report.skipped), 'short exercise')} not compared). A lead to read, not a verdict: no grade "
            "is changed. Side by side: "
            "<a href='../similarity/index.html'>similarity/index.html</a>"
            + (f" (the {len(rows)} most similar below)" if len(report.flagged) > len(rows) else "") + ".</p>"
            + (_table(["similarity", "exercise", "student", "with"], rows, sortable=True) if rows else ""))


def build_report(out: Path, roster_file: Path | None = None) -> Path:
    """Write ``OUT/report/index.html`` and its figures; returns the page's path. Students are shown with their
    names (:func:`.roster.for_run`: ``roster_file``, else those ``grade`` kept in ``OUT/roster.csv``).

    Raises:
        FileNotFoundError: ``OUT/results.json`` is missing (the class was not graded).
        RosterError: ``roster_file`` cannot be read or lacks its columns.
    """
    names = roster.for_run(out=out, roster=roster_file)
    results = _load(out)
    if (out / "nbgrader" / "gradebook.db").is_file():  # the instructor's points since the last `grade`
        from transformer_course.grading.run.publish import refresh_written
        from transformer_course.layout import Repo

        refresh_written(out, Repo())
        results = _load(out)
    folder = out / "report"
    folder.mkdir(parents=True, exist_ok=True)
    figures = _figures(results, folder)
    mistakes: dict[tuple[str, str], list[str]] = defaultdict(list)
    unnamed: dict[tuple[str, str], list[str]] = defaultdict(list)
    stats: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for r in results:
        for e in r["exercises"]:
            key = (r["assignment"], e["exercise"])
            if r["status"] == "graded":
                stats[key].append((e["score"], e["max_score"]))
            if r["status"] != "graded" or e["score"] >= e["max_score"] or e["feedback"].startswith(_NOT_ATTEMPTED):
                continue
            name = mistake_of(e["feedback"])
            if name:
                mistakes[(e["exercise"], name)].append(r["student_id"])
            else:
                unnamed[key].append(r["student_id"])
    ranked = sorted(mistakes.items(), key=lambda item: (-len(item[1]), item[0]))
    def named(student: str) -> list[str]:  # the name column, where any name is known (else as before)
        return [name_html(student, names)] if names else []

    name_col = ["name"] if names else []

    def who(ids: list[str]) -> str:
        return ", ".join(label_html(s, names) for s in sorted(ids, key=lambda s: roster.sort_key(s, names)))

    mistake_rows = [[html.escape(exercise), html.escape(name), f"{len(ids)}", who(ids)]
                    for (exercise, name), ids in ranked]
    exercise_rows = [[html.escape(a), html.escape(x), f"{100 * sum(s >= m for s, m in v) / len(v):.0f} %",
                      f"{sum(s for s, _ in v) / len(v):.2f} / {v[0][1]:g}", f"{len(unnamed.get((a, x), []))}"]
                     for (a, x), v in sorted(stats.items())]
    status_rows = [[html.escape(r["student_id"]), *named(r["student_id"]), html.escape(r["assignment"]),
                    "excused" if r.get("excused") else html.escape(r["status"]), html.escape(r["reason"] or "")]
                   for r in results if r["status"] != "graded"]
    unnamed_rows = [[html.escape(a), html.escape(x), f"{len(ids)}", who(ids)]
                    for (a, x), ids in sorted(unnamed.items(), key=lambda item: -len(item[1]))]
    late_rows = [[html.escape(r["student_id"]), *named(r["student_id"]), html.escape(r["assignment"]),
                  (show(r["due"]) + (" (extended)" if r.get("extended") else "")) if r.get("due") else "",
                  show(r["submitted_at"]), f"{r['late_by']:g}", f"{r['late_penalty']:g}",
                  html.escape(r.get("late_note") or "")] for r in results if r.get("late_by")]
    excused_rows = [[html.escape(r["student_id"]), *named(r["student_id"]), html.escape(r["assignment"])]
                    for r in results if r.get("excused")]
    extended_rows = [[html.escape(r["student_id"]), *named(r["student_id"]), html.escape(r["assignment"]),
                      show(r["due"])] for r in results if r.get("extended") and r.get("due")]
    students = sorted({r["student_id"] for r in results}, key=lambda s: roster.sort_key(s, names))
    assignments = sorted({r["assignment"] for r in results})
    by_key = {(r["student_id"], r["assignment"]): r for r in results}
    score_rows = []
    for student in students:
        cells, total, total_max = [], 0.0, 0.0
        for a in assignments:
            r = by_key.get((student, a))
            if r is not None and r.get("excused"):  # Canvas's meaning: it does not count
                cells.append("excused")
                continue
            if r is None or not r["exercises"]:
                cells.append("")
                continue
            final, raw, top = scores(r)
            total, total_max = total + final, total_max + top
            cells.append(f"{final:g} / {top:g}" + (f" (raw {raw:g})" if raw != final else "")
                         + ("; changed by hand" if r.get("overrides") else "") + _written(r))
        score_rows.append([html.escape(student), *named(student), *cells, f"{total:g} / {total_max:g}"])
    awaiting = sum(r.get("manual_status") == "awaiting" for r in results)
    timed = any(r.get("submitted_at") for r in results)
    late_html = (_table(["student", *name_col, "assignment", "due", "handed in", "late by (h)", "points off", "note"],
                        late_rows, sortable=True)
                 if late_rows else f"<p>{'Everyone handed in on time.' if timed else 'No deadline was given.'}</p>")
    late_html += ("<p>Extensions (the deadlines file's <code>[extensions]</code>): each student's own due date."
                  "</p>" + _table(["student", *name_col, "assignment", "due"], extended_rows, sortable=True)
                  if extended_rows else "")
    late_html += ("<p>Excused (<code>[excused]</code>, or the LMS's <code>excused.csv</code>): these do not count, "
                  "in no total and never late.</p>" + _table(["student", *name_col, "assignment"], excused_rows,
                                                               sortable=True) if excused_rows else "")
    similar = _similarity_section(out, names)
    images = "".join(f'<figure><img src="{name}" alt="{html.escape(caption)}"><figcaption>{html.escape(caption)}'
                     f"</figcaption></figure>" for name, caption in figures)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Class report</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:left;
vertical-align:top}}th{{background:#f3f3f3}}img{{max-width:100%}}figure{{margin:1em 0}}</style></head><body>
<h1>Class report</h1>
<p>{count(len(students), 'student')}, {count(len(assignments), 'assignment')}, {count(len(results), 'notebook')};
built from <code>results.json</code>.</p>
{images}
<h2>Scores</h2>
<p>Final scores, after late penalties (as in <code>lms.csv</code>); the raw score follows where a penalty took
points off. "Written" is the answers in words, graded by hand in formgrader: their points, or
"awaiting" until every question of the notebook has points ({count(awaiting, 'notebook')} awaiting). An excused
notebook does not count (in no total). Click a column's heading to sort the table by it.</p>
{_table(["student", *name_col, *assignments, "total"], score_rows, sortable=True)}
<h2>Named mistakes, most frequent first</h2>
{_table(["exercise", "mistake", "students", "who"], mistake_rows) if mistake_rows else "<p>None.</p>"}
<h2>Exercises</h2>
{_table(["assignment", "exercise", "at full marks", "mean score (before late penalties)",
         "lost points, no mistake named"], exercise_rows)}
<h2>Lost points without a named mistake</h2>
<p>Where the feedback could only say that values differ: the notebook's text or a check may need work.</p>
{_table(["assignment", "exercise", "students", "who"], unnamed_rows) if unnamed_rows else "<p>None.</p>"}
<h2>Late</h2>
<p>From nbgrader's <code>timestamp.txt</code> of each submission, against the run's deadlines
(<code>--due</code>, <code>--deadlines</code>).</p>
{late_html}
<h2>Similar answers</h2>
{similar}
<h2>Not graded</h2>
{_table(["student", *name_col, "assignment", "status", "why"], status_rows, sortable=True) if status_rows
  else "<p>Everyone was graded.</p>"}
{roster.SORTABLE}
</body></html>
"""
    index = folder / "index.html"
    index.write_text(page)
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="transformer-course report", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the OUT folder of `transformer-course grade`")
    args = parser.parse_args(argv)
    try:
        index = build_report(args.out)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"report: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
