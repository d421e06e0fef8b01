"""``make bench BENCH_FLAGS=--lti-only``: a class of 300 students x the course's 8 assignments pushed through LTI 1.3
Advantage (roster by NRPS, then one line item and 300 scores per assignment by AGS) to a platform on 127.0.0.1
(tests/lti_platform.py, in a process of its own as an LMS is another machine), through the real CLI, timed (bound:
within 60 s), then pushed again (nothing left to send). The platform then holds exactly the expected score,
progress and comment of every student (checked, or the bench fails). LTI_BENCH_STUDENTS=N sets the class size.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import sys
import tempfile
from pathlib import Path

from quality.lms_bench import answered, push_twice
from tests.lti_platform import LocalPlatform
from transformer_course.cli import main as cli
from transformer_course.layout import Repo
from transformer_course.lms.lti import LEARNER

STUDENTS = int(os.environ.get("LTI_BENCH_STUDENTS", 300))
BOUND_S = 60.0


def _class(out: Path, assignments: list[str]) -> dict[tuple[str, str], tuple[float, str]]:
    """results.json as `grade` writes it; every third student's answers in words still to grade. Returns
    (student, assignment) -> (points, gradingProgress) expected in the LMS."""
    rows, expected = [], {}
    for n, assignment in enumerate(assignments):
        for s in range(STUDENTS):
            auto, awaiting = float((s + n) % 12), s % 3 == 0
            manual = None if awaiting else float(s % 5 % 4)
            rows.append({"student_id": f"s{s:03d}", "assignment": assignment, "status": "graded", "reason": "",
                         "exercises": [{"exercise": "e", "score": auto, "max_score": 11.0, "feedback": ""}],
                         "late_penalty": 0.0, "manual_score": manual, "manual_max_score": 4.0,
                         "manual_status": "awaiting" if awaiting else "graded"})
            expected[f"s{s:03d}", assignment] = (auto + (manual or 0.0),
                                                 "PendingManual" if awaiting else "FullyGraded")
    (out / "results.json").write_text(json.dumps(rows))
    return expected


def _serve(conn) -> None:
    """The platform: serves until asked for its figures, then answers them."""
    people = [{"user_id": f"lms-{s}", "name": f"Student {s}", "email": f"s{s:03d}@school.edu", "status": "Active",
               "roles": [LEARNER]} for s in range(STUDENTS)]
    with LocalPlatform({"keys": []}, members=people) as platform:
        conn.send({k: getattr(platform, k) for k in ("issuer", "client_id", "deployment_id", "token_url",
                                                      "jwks_url", "lineitems_url", "memberships_url")})
        platform.trust(conn.recv())
        while (ask := conn.recv()) != "stop":
            if ask == "requests":
                conn.send([(m, p) for m, p, _ in platform.requests])
                continue
            wrong = []
            for (student, assignment), (points, progress) in ask.items():
                item = platform.line_item(resource_id=assignment)
                got = platform.result(item["id"], f"lms-{int(student[1:])}") if item else None
                if not got or (got["scoreGiven"], got["gradingProgress"]) != (points, progress):
                    wrong.append((student, assignment))
            conn.send(wrong)


def main() -> int:
    assignments = [a.name for a in Repo().assignments()]
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(theirs,), daemon=True)
    server.start()
    where = ours.recv()
    with tempfile.TemporaryDirectory(prefix="lti-bench-") as tmp:
        folder, out = Path(tmp) / "lti", Path(tmp) / "out"
        out.mkdir()
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            cli(["lti", "init", str(folder), *[f"--{k.replace('_', '-')}={v}" for k, v in where.items()
                                               if k != "jwks_url"], f"--keyset-url={where['jwks_url']}"])
        ours.send(json.loads((folder / "jwks.json").read_text()))
        expected = _class(out, assignments)
        argv = ["lti", "push", str(folder), str(out), *[f"--assignment={a}" for a in assignments]]
        # the first: the roster (NRPS), then the push; again: the push alone
        first, second, pushed, again_s, requests_first = push_twice(
            lambda: max(cli(["lti", "roster", str(folder), str(out)]), cli(argv)), lambda: cli(argv), ours)
    requests = answered(ours)
    ours.send(expected)
    wrong = ours.recv()
    ours.send("stop")
    server.join(10)
    scores_again = sum(1 for m, p in requests[requests_first:] if m == "POST" and p.endswith("/scores"))
    print(f"\nLTI 1.3 push (quality/lti_bench.py): {STUDENTS} students x {len(assignments)} assignments (roster by "
          f"NRPS, a line item and a score each by AGS) to a local platform (its own process), load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores:")
    print(f"  roster and first push: {pushed:.1f} s, {requests_first} requests "
          f"({pushed / (STUDENTS * len(assignments)) * 1000:.1f} ms a score); bound {BOUND_S:.0f} s: "
          f"{'ok' if pushed <= BOUND_S else 'OVER'}")
    print(f"  second push: {again_s:.1f} s, {len(requests) - requests_first} requests, {scores_again} scores "
          "sent (0 expected: nothing changed)")
    print(f"  scores whose points or progress are not the expected ones: {len(wrong)}")
    ok = first == second == 0 and not wrong and scores_again == 0 and pushed <= BOUND_S
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
