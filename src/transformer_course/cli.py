"""Command line: ``transformer-course build | grade | check``."""

from __future__ import annotations

import argparse
import atexit
import os
import sys
from pathlib import Path

# nbformat's jsonschema imports rfc3987_syntax when it is installed, which builds ~35 parsers at
# import: 0.8 s of every command's start, for the "iri" string format, which no notebook schema uses
# and nbformat never checks (python-jsonschema/jsonschema#1428). Left out, jsonschema skips that format.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]

from transformer_course.layout import ERRORS_LOG, GRADER_ERROR, Repo  # noqa: E402 (after the line above)
from transformer_course.words import count  # noqa: E402


def _user_path(text: str) -> Path:
    """A path as the user typed it, relative to their working directory, made absolute once:
    everything below may change directory or hand the path to nbgrader, which resolves
    relative paths against its own course root."""
    return Path(text).expanduser().resolve()


def _build(args: argparse.Namespace) -> int:
    from transformer_course.course.build import build

    repo = Repo()
    repo.prefer_shared_multi30k()  # a retrained 07 or 08 reads the shared copy where there is one
    retrain = True if args.retrain == [] else args.retrain or False  # --retrain alone: every training notebook
    built = build(repo, run_solutions=not args.no_execute, retrain=retrain, train_config=args.train_config,
                  rerun=args.rerun)
    print(f"built {count(len(built), 'notebook')} into course/ and solutions/")
    return 0


_AS_COMMAND = False  # run(): this process ends after the command
CHECK_TIMEOUT = 30  # s of CPU time a cell may spend in `check`, unless --timeout says otherwise


def _traceback(args: argparse.Namespace) -> None:
    """With --debug: the traceback of the exception being handled, before the command's one line.
    Else the process ends quietly after that line: no library's exit-time traceback or log (Dask's
    threads and exit handlers after Ctrl-C) follows it."""
    if getattr(args, "debug", False):
        import traceback

        traceback.print_exc()
        return
    if not _AS_COMMAND:  # main() called in a process that goes on (a test): leave its hooks alone
        return
    import logging
    import threading

    sys.unraisablehook = lambda unraisable: None
    threading.excepthook = lambda hook_args: None
    for name in ("distributed", "asyncio", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _what(exc: BaseException, fault: object) -> str:
    """What happened, in words: the storage fault, else the exception in one line."""
    from transformer_course.grading.notebook.grade import one_line

    return fault.what() if fault is not None else one_line(f"{type(exc).__name__}: {exc}", 300)


def _grade(args: argparse.Namespace) -> int:
    from transformer_course.grading.notebook.grade import score_table
    from transformer_course.grading.run.batch import OutputBusy, grade_class, selected
    from transformer_course.grading.run.faults import fault_of, kept_line, resume_hint
    from transformer_course.instructors import roster
    from transformer_course.instructors.deadlines import EXCUSED_CSV
    from transformer_course.instructors.deadlines import load as load_deadlines

    out = _user_path(args.out)
    submitted = _user_path(args.submitted)
    repo = Repo()
    try:
        only = selected(repo, args.assignment)
    except KeyError as exc:
        print(f"transformer-course grade: error: {exc.args[0]}", file=sys.stderr)
        return 2
    # Deadlines and names are read (and a malformed file refused) before any grading starts.
    deadlines = load_deadlines(_user_path(args.deadlines) if args.deadlines else None, args.due,
                               known=[a.name for a in repo.assignments()], excused_csv=submitted.parent / EXCUSED_CSV,
                               policy=args.late_policy, points=args.late_points, percent_per_day=args.late_percent,
                               cap=args.late_cap)
    names = roster.for_run(submitted, _user_path(args.roster) if args.roster else None)
    if deadlines is not None:
        print(f"late policy: {deadlines.policy.describe()}", file=sys.stderr)
        if strangers := deadlines.strangers(submitted, names):
            print(f"warning: the deadlines name student(s) with no folder in {args.submitted} and no name in the "
                  f"roster: {', '.join(strangers)} (a typo in an id?)", file=sys.stderr)
    try:
        results = grade_class(submitted, out, repo, timeout=args.timeout, names=names,
                              workers=args.workers, scheduler=args.scheduler, regrade=args.regrade,
                              memory_mb=args.memory_limit, notebook_timeout=args.notebook_timeout,
                              max_output_mb=args.max_output, deadlines=deadlines, only=only,
                              max_submission_mb=args.max_submission_mb or None)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (grading/stop.py): what was in progress is not kept
        _traceback(args)
        code = getattr(exc, "exit_code", 130)
        print(f"\n{'interrupted' if code == 130 else 'terminated'}: "
              f"{kept_line(getattr(exc, 'grading_progress', None), args.out)}; run the same command "
              "again to grade the rest", file=sys.stderr)
        return code
    except OutputBusy as exc:
        print(f"transformer-course grade: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a full disk, a read-only OUT, ...: one line, what was kept, how to go on
        fault = fault_of(exc)
        if fault is None and isinstance(exc, FileNotFoundError | ValueError | KeyError):
            raise  # a usage error: main() says it
        _traceback(args)
        print(f"\ntransformer-course grade: error: {_what(exc, fault)}: "
              f"{kept_line(getattr(exc, 'grading_progress', None), args.out)}; {resume_hint(fault, args.out)}",
              file=sys.stderr)
        return 1
    print(score_table(results, names))
    print(f"\nwrote {args.out}/grades.csv, exercises.csv, lms.csv, feedback/ and nbgrader/ (gradebook)")
    if awaiting := sum(r.manual_status == "awaiting" for r in results):
        print(f"{awaiting} notebook{'s have' if awaiting > 1 else ' has'} answers in words awaiting your grading: "
              "open the formgrader in "
              f"{args.out}/nbgrader (docs/instructors.md, 'Questions answered in words'); the next `grade` or "
              "`report` puts the points you give in the tables and on the feedback pages")
    failed = [r for r in results if r.status == GRADER_ERROR]
    if failed:
        # Loud and last: these rows are the grader's failure, not the students' grades.
        from transformer_course.grading.run.batch import KILLED

        killed = sum(KILLED in r.reason for r in failed)
        print(f"\n{len(failed)} notebook{'s' if len(failed) != 1 else ''} could not be graded because of a "
              f"grader error{f' ({killed} because a grading worker process died)' if killed else ''}: see "
              f"{args.out}/{ERRORS_LOG}. They are not recorded as graded; fix the cause "
              "and run the same command again to grade them.", file=sys.stderr)
        return 1
    return 0


def _check(args: argparse.Namespace) -> int:
    import tempfile

    from transformer_course.grading import check_server
    from transformer_course.grading.notebook import workarea

    repo = Repo()
    notebook = _user_path(args.notebook)
    if (answer := check_server.ask(repo, notebook, args.timeout, args.json)) is not None:
        out, err, code = answer  # the warm server's (grading/check_server.py)
        print(err, end="", file=sys.stderr)
        print(out, end="")
        return code
    with tempfile.TemporaryDirectory(prefix="tc-check-") as tmp:
        work = Path(tmp) / "nbgrader"
        workarea.create(work, repo)  # its kernel template imports torch while the grader's modules import
        from transformer_course.grading.notebook.grade import check, check_report

        result = check(notebook, repo, timeout=args.timeout, work=work, created=True)
    text, code = check_report(result, repo, args.json)
    print(text, end="")
    sys.stdout.flush()
    check_server.start(repo, args.timeout)  # for the next check: set up while this answer is read
    return code


def _gradescope(args: argparse.Namespace) -> int:
    from transformer_course.instructors.gradescope import build_bundle

    zipped = build_bundle(args.assignment, _user_path(args.out), Repo(), args.timeout, args.visibility)
    print(f"Gradescope autograder: {zipped} (upload it with the Ubuntu 24.04 base image)")
    return 0


def _report(args: argparse.Namespace) -> int:
    from transformer_course.grading.run.faults import check_writable, fault_of, resume_hint
    from transformer_course.instructors.report import build_report

    out = Path(args.out)
    try:
        if out.is_dir():
            check_writable(out)  # a read-only OUT says so, not "nbgrader generate_assignment failed"
        page = build_report(out, _user_path(args.roster) if args.roster else None)
    except KeyboardInterrupt:
        _traceback(args)
        print("\ninterrupted: the report is not complete; run the same command again", file=sys.stderr)
        return 130
    except Exception as exc:
        fault = fault_of(exc)
        if fault is None and isinstance(exc, FileNotFoundError | ValueError | KeyError):
            raise  # a usage error (OUT not graded): main() says it
        _traceback(args)
        print(f"transformer-course report: error: {_what(exc, fault)}: the report was not written; "
              f"{resume_hint(fault, args.out)}", file=sys.stderr)
        return 1
    print(f"report: {page}")
    return 0


def _collect(args: argparse.Namespace) -> int:
    from transformer_course.instructors.collect import run

    return run(args)


def _lms(args: argparse.Namespace) -> int:
    from transformer_course.lms.gradebook import run

    return run(args)


def _canvas(args: argparse.Namespace) -> int:
    from transformer_course.lms.canvas import run

    return run(args)


def _lti(args: argparse.Namespace) -> int:
    from transformer_course.lms.lti import run

    return run(args)


def _similarity(args: argparse.Namespace) -> int:
    from transformer_course.instructors.similarity import run

    return run(args)


def _release(args: argparse.Namespace) -> int:
    from transformer_course.instructors.deadlines import load as load_deadlines
    from transformer_course.instructors.release import EarlyAnswersError, course_notebooks, release

    repo = Repo()
    # The sample deadlines file by default: where it is absent, no due date holds a notebook back.
    path = _user_path(args.deadlines) if args.deadlines else repo.autograder / "deadlines.toml"
    deadlines = load_deadlines(path if args.deadlines or path.is_file() else None, known=course_notebooks(repo))
    try:
        files = release(repo, args.repository, Path(args.out), assignments=args.assignment, deadlines=deadlines,
                        allow_early_answers=args.allow_early_answers)
    except EarlyAnswersError as exc:  # refused for the deadlines, not a mistake in the command (that is 2)
        print(f"transformer-course release: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(files)} files to {args.out}: the students' repository (no solutions, hidden tests or grader)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="transformer-course", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("build", help="generate course/ (student release) and solutions/ (executed)")
    p.add_argument("--no-execute", action="store_true", help="write solutions without running them")
    p.add_argument("--retrain", nargs="*", metavar="ASSIGNMENT", default=None,
                   help="re-run the training notebooks (07, 08), or those named, even if their executed "
                        "solutions are up to date")
    p.add_argument("--rerun", action="store_true",
                   help="execute every solution again, even those whose code and shipped files are unchanged")
    p.add_argument("--train-config", choices=["gpu", "cpu", "tiny"], default=None,
                   help="the training notebooks' configuration (default: gpu if CUDA is available, else cpu)")
    p.set_defaults(func=_build)

    p = sub.add_parser("grade", help="autograde SUBMITTED/<student_id>/<assignment>/<notebook>.ipynb")
    p.add_argument("submitted", help="folder of student folders (nbgrader's submitted/ layout)")
    p.add_argument("--out", required=True, help="where grades.csv, exercises.csv and feedback/ go")
    p.add_argument("--timeout", type=int, default=30, help="CPU seconds a cell may spend (default 30)")
    p.add_argument("--workers", type=int, default=None,
                   help="grading processes on this machine (default: one per core; 1 = no Dask)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="a running Dask scheduler (tcp://host:8786) whose workers share this folder")
    p.add_argument("--regrade", action="store_true", help="grade again what an earlier run already graded")
    p.add_argument("--assignment", action="append", default=None, metavar="NAME",
                   help="grade, report and count only this assignment (a name such as 02_scaled_dot_product, or "
                        "its number, 02); repeat it for several (default: every assignment)")
    p.add_argument("--memory-limit", type=int, default=4096, metavar="MIB",
                   help="memory one notebook's kernel may allocate, MiB (default 4096; 0 = no limit)")
    p.add_argument("--notebook-timeout", type=int, default=1800, metavar="SECONDS",
                   help="seconds a whole notebook may run on the clock at most; within it, 10 x --timeout plus 5 s "
                        "for each CPU second its cells compute; later cells are not run (default 1800; 0 = no cap)")
    p.add_argument("--max-output", type=float, default=10.0, metavar="MCHARS",
                   help="output kept of a whole notebook, millions of characters (default 10)")
    p.add_argument("--max-submission-mb", type=float, default=50.0, metavar="MIB",
                   help="a notebook larger than this is refused before it is read (default 50; 0 = no cap)")
    p.add_argument("--due", default=None, metavar="WHEN",
                   help="every assignment's due date, ISO 8601 with its time zone (2026-12-01T23:59:00+01:00); "
                        "lateness comes from nbgrader's timestamp.txt in each submission folder")
    p.add_argument("--deadlines", default=None, metavar="FILE",
                   help="a TOML file of due dates (per assignment too) and the late policy; options here win")
    p.add_argument("--late-policy", choices=["none", "fixed", "per-day"], default=None,
                   help="none (default: lateness only reported), fixed (--late-points off a late notebook) or "
                        "per-day (--late-percent of its points per started day, up to --late-cap percent)")
    p.add_argument("--late-points", type=float, default=None, metavar="POINTS", help="for --late-policy fixed")
    p.add_argument("--late-percent", type=float, default=None, metavar="PERCENT",
                   help="for --late-policy per-day: percent of the notebook's points per started day late")
    p.add_argument("--late-cap", type=float, default=None, metavar="PERCENT",
                   help="for --late-policy per-day: at most this percent in all (default 100)")
    p.add_argument("--roster", default=None, metavar="FILE.csv",
                   help="students' names (columns student_id,name) shown beside their ids; default: students.csv "
                        "beside SUBMITTED (written by collect), else ids alone")
    p.add_argument("--debug", action="store_true", help="show the traceback of a failure (a full disk, Ctrl-C, ...)")
    p.set_defaults(func=_grade)

    p = sub.add_parser("check", help="grade one notebook of your own, without a gradebook")
    p.add_argument("notebook", help="path to your NN_name.ipynb")
    p.add_argument("--json", action="store_true",
                   help="print the result as JSON (score, max_score, per-exercise score, max_score, feedback)")
    p.add_argument("--timeout", type=int, default=CHECK_TIMEOUT,
                   help=f"CPU seconds a cell may spend (default {CHECK_TIMEOUT})")
    p.set_defaults(func=_check)

    p = sub.add_parser("gradescope", help="a Gradescope autograder zip for one assignment")
    p.add_argument("assignment", help="e.g. 01_self_attention")
    p.add_argument("--out", required=True, help="the zip to write, e.g. autograder.zip")
    p.add_argument("--timeout", type=int, default=60, help="CPU seconds a cell may spend (default 60)")
    p.add_argument("--visibility", default="visible",
                   choices=["hidden", "after_due_date", "after_published", "visible"],
                   help="when students see each exercise's result and feedback (default visible)")
    p.set_defaults(func=_gradescope)

    p = sub.add_parser("release", help="the students' repository: course/ without solutions, hidden tests or grader")
    p.add_argument("--repository", required=True, metavar="github.com/ORG/NAME",
                   help="the students' repository: the notebooks' Colab, Binder and download addresses point to it")
    p.add_argument("--out", required=True, help="an empty or new folder to write it to")
    p.add_argument("--assignment", action="append", default=None, metavar="NAME",
                   help="release only this notebook (01_self_attention, or its number, 01); repeat it for several "
                        "(default: every notebook)")
    p.add_argument("--deadlines", default=None, metavar="FILE",
                   help="due dates (the TOML file of `grade --deadlines`; default autograder/deadlines.toml): a "
                        "notebook whose course_blocks.py holds an earlier notebook's answers is refused before "
                        "that notebook is due")
    p.add_argument("--allow-early-answers", action="store_true",
                   help="release such a notebook anyway, with a warning")
    p.set_defaults(func=_release)

    from transformer_course.instructors.similarity import add_arguments

    p = sub.add_parser("similarity", help="answers that look copied: every pair of students and the published "
                                          "solutions, per exercise, into OUT/similarity/")
    add_arguments(p)
    p.set_defaults(func=_similarity)

    from transformer_course.instructors.collect import add_arguments as collect_arguments

    p = sub.add_parser("collect", help="unpack an LMS's download (Canvas, Moodle, GitHub Classroom, nbgrader) "
                                       "into SUBMITTED/<student_id>/<assignment>/")
    collect_arguments(p)
    p.set_defaults(func=_collect)

    from transformer_course.lms.gradebook import add_arguments as lms_arguments

    p = sub.add_parser("lms", help="grades back into Canvas or Moodle without their API: fill the gradebook file "
                                   "downloaded from the LMS (docs/lms-files.md)")
    lms_arguments(p)
    p.set_defaults(func=_lms)

    from transformer_course.lms.canvas import add_arguments as canvas_arguments

    p = sub.add_parser("canvas", help="Canvas through its API: submission times and names in (times), grades and "
                                      "comments out (push); docs/lms.md")
    canvas_arguments(p)
    p.set_defaults(func=_canvas)

    from transformer_course.lms.lti import add_arguments as lti_arguments

    p = sub.add_parser("lti", help="any LMS through LTI 1.3 Advantage: the tool's keys and registration (init, "
                                   "check), the roster (NRPS), grades and comments out (AGS push); docs/lti.md")
    lti_arguments(p)
    p.set_defaults(func=_lti)

    p = sub.add_parser("report", help="a class report (HTML and PNG) from a graded OUT, into OUT/report/")
    p.add_argument("out", help="the --out folder of `transformer-course grade`")
    p.add_argument("--roster", default=None, metavar="FILE.csv",
                   help="students' names (columns student_id,name); default: those `grade` kept in OUT/roster.csv")
    p.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    p.set_defaults(func=_report)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        print(f"transformer-course {args.command}: error: {exc}", file=sys.stderr)
        return 2


def run() -> None:
    """The ``transformer-course`` command: :func:`main`; after ``check``, the process then ends
    without the interpreter's teardown of torch and nbgrader (0.45 s, an eighth of a check), once
    the exit handlers have run and the output is flushed."""
    global _AS_COMMAND
    _AS_COMMAND = True
    code = main()
    if sys.argv[1:2] == ["check"]:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
