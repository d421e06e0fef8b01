"""The quality suite, kept out of the installed package: the catalogue's loader (the answers are files
under ``catalogue/``), attacks on the grader, the fairness runner, the similarity test class, benchmarks,
and the sample class's expectations (``make grade`` runs ``python -m quality.expected``). Run from the
repository's root, which puts this folder on the path; the package never imports it (tests/test_layout.py)."""
