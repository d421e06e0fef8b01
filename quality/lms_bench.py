"""``make bench BENCH_FLAGS=--lms-only``: a push of a class of 300 students x the course's 8 assignments to a
Canvas on 127.0.0.1 (tests/fake_canvas.py), through the real CLI, timed (bound: within 60 s), then the same
push again (nothing left to send), with Canvas's throttling on (its bucket's defaults in canvas-lms
lib/canvas/request_throttle.rb: 600 of quota, 10 a second back, 50 charged in advance for each request in
flight) and the requests it refused counted.

Each student's grade, comment and feedback page (``--comment-with-page``) are sent; the server then holds
exactly the expected score and comment of every one (checked, or the bench fails). LMS_BENCH_STUDENTS=N sets the
class size (300).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.fake_canvas import Bucket, FakeCanvas
from transformer_course.cli import main as cli
from transformer_course.layout import Repo

STUDENTS = int(os.environ.get("LMS_BENCH_STUDENTS", 300))
BOUND_S = 60.0
FIRST_ID = 20001


def _class(out: Path, assignments: list[str]) -> dict[tuple[str, str], float]:
    """results.json and feedback pages as `grade` writes them (grading/run/publish.py); returns the grades."""
    rows, grades = [], {}
    for n, assignment in enumerate(assignments):
        for s in range(STUDENTS):
            student = str(FIRST_ID + s)
            auto, manual = float((s + n) % 12), float(s % 3)
            rows.append({"student_id": student, "assignment": assignment, "status": "graded", "reason": "",
                         "exercises": [{"exercise": "e", "score": auto, "max_score": 11.0, "feedback": ""}],
                         "submitted_at": "", "late_by": 0.0, "late_penalty": 0.0, "late_note": "", "due": "",
                         "manual_score": manual, "manual_max_score": 4.0, "manual_status": "graded"})
            grades[student, assignment] = auto + manual
            page = out / "feedback" / student / assignment / f"{assignment}.html"
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(f"<html><body><h1>{student}: {assignment}</h1>{'<p>ok</p>' * 40}</body></html>\n")
    (out / "results.json").write_text(json.dumps(rows))
    return grades


def _serve(conn, assignments: list[str]) -> None:
    """The Canvas, in a process of its own (as an LMS is another machine): serves until asked for its
    figures, then answers them: requests, throttled, and the submissions not holding the expected grade."""
    fake = FakeCanvas(token="bench-token", bucket=Bucket(capacity=600.0, leak=10.0, cost=0.05, up_front=50.0))
    for s in range(STUDENTS):
        fake.add_student(FIRST_ID + s, f"Student {s}", f"s{s}", f"SIS-{s}")
    ids = {a: fake.add_assignment(a, 15.0) for a in assignments}
    for aid, uid in list(fake.submissions):
        fake.hand_in(aid, uid, "2026-11-23T18:00:00Z")
    conn.send((fake.start(), fake.token, fake.course["id"]))
    while (ask := conn.recv()) != "stop":
        if ask == "requests":
            conn.send([m for m, _ in fake.requests])
            continue
        wrong = [(s, a) for (s, a), g in ask.items() if fake.submissions[ids[a], int(s)]["score"] != g
                 or len(fake.submissions[ids[a], int(s)]["submission_comments"]) != 1]
        conn.send((wrong, fake.throttled))
    fake.stop()


def answered(ours) -> list:
    """The requests the LMS process has answered so far (it sends them when asked ``"requests"``)."""
    ours.send("requests")
    return ours.recv()


def push_twice(first, again, ours) -> tuple[int, int, float, float, int]:
    """``first()`` then ``again()``, each a push through the CLI, with their tables silenced (2,400 lines are
    not the figure): their exit codes, their seconds, and the requests the LMS had answered after the first."""
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        start = time.perf_counter()
        code_first = first()
        middle = time.perf_counter()
        after_first = len(answered(ours))
        code_again = again()
        end = time.perf_counter()
    return code_first, code_again, middle - start, end - middle, after_first


def main() -> int:
    assignments = [a.name for a in Repo().assignments()]
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(theirs, assignments), daemon=True)
    server.start()
    url, token, course = ours.recv()
    os.environ.update(CANVAS_URL=url, CANVAS_TOKEN=token, CANVAS_COURSE_ID=str(course))
    argv = ["canvas", "push", "--comment-with-page", *[f"--assignment={a}" for a in assignments]]
    with tempfile.TemporaryDirectory(prefix="lms-bench-") as tmp:
        out = Path(tmp)
        grades = _class(out, assignments)
        first, second, pushed, again_s, requests_first = push_twice(
            lambda: cli([*argv, str(out)]), lambda: cli([*argv, str(out)]), ours)
    methods = answered(ours)
    ours.send(grades)
    wrong, throttled = ours.recv()
    ours.send("stop")
    server.join(10)
    sends = sum(1 for m in methods[requests_first:] if m in ("PUT", "POST"))
    each = pushed / (STUDENTS * len(assignments)) * 1000
    print(f"\nCanvas push (quality/lms_bench.py): {STUDENTS} students x {len(assignments)} assignments, grade + "
          f"comment + feedback page each, to a local Canvas (its own process), load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores:")
    print(f"  first push: {pushed:.1f} s, {requests_first} requests ({each:.1f} ms a submission); "
          f"bound {BOUND_S:.0f} s: {'ok' if pushed <= BOUND_S else 'OVER'}")
    print(f"  second push: {again_s:.1f} s, {len(methods) - requests_first} requests, {sends} sent "
          "(0 expected: nothing changed)")
    print(f"  refused by Canvas's throttling: {throttled} (0 expected: a few requests at a time)")
    print(f"  submissions whose score or comment is not the expected one: {len(wrong)}")
    ok = first == 0 and second == 0 and not wrong and sends == 0 and pushed <= BOUND_S
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
