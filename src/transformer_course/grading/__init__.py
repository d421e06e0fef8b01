"""Grading: one notebook (:mod:`.grade`), a class (:mod:`.batch`), the work area and what its kernels
see (:mod:`.workarea`), nbgrader's configuration (:mod:`.nbgrader_setup`), the sandbox and the kernels
(:mod:`.sandbox`, :mod:`.kernels`, :mod:`.forkserver`), and the judge (:mod:`.judge`, :mod:`.recorder`)."""
