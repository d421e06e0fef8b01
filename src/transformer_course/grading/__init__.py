"""Grading, by stage, in the order a hand-in goes through them (each stage imports only the ones before
it, and output):

- :mod:`.submission`: finding, reading and recognising what a student handed in;
- :mod:`.kernel`: where the student's code runs (the sandbox, its limits, the warm kernel template, the
  recorder that answers the judge);
- :mod:`.judging`: the grader's side of each test cell (the judge, what it lends, its box);
- :mod:`.notebook`: one notebook graded (nbgrader set up around the kernel and the judge, the work area,
  the time limits, the verdicts checked again);
- :mod:`.run`: the class run, every (student, assignment) pair inside one fault boundary
  (:mod:`.run.boundary`), the gradebook and the tables;
- :mod:`.output`: what is written for people, whole and safe to open (every stage writes through it).

At the top: :mod:`.version` (what a record was made with), :mod:`.stop` (the run's Ctrl-C, seen by every
stage) and :mod:`.check_server` (``transformer-course check``, warm)."""
