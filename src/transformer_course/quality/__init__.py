"""The quality suite: catalogues of correct variants and mistakes, attacks on the grader, fairness
figures, the similarity test class, benchmarks, and the sample class's expectations. The grader
never imports it (tests/test_layout.py)."""
