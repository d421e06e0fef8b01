"""Stage 4, one notebook: nbgrader set up around the kernel and the judge, one hand-in graded.

- :mod:`.workarea`: the nbgrader course root one grading process grades in, and what its kernels see;
- :mod:`.nbgrader_setup`: nbgrader's configuration (shared with the build and autograder/);
- :mod:`.cell_schema`: nbgrader's cell-metadata check, its schema checked once per process;
- :mod:`.limits`: time limits that scale with the machine;
- :mod:`.verify`: verdicts checked again outside the student's process;
- :mod:`.grade`: one (student, assignment) pair graded, and ``transformer-course check``.
"""
