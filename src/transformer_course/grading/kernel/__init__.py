"""Stage 2, the kernel: where the student's code runs, and what bounds it.

- :mod:`.sandbox`: bubblewrap around every grading kernel;
- :mod:`.memcg`: control groups around a sandbox (memory, files in its tmpfs, processes);
- :mod:`.cputime`: the CPU seconds of a notebook's own processes, what a cell's limit counts;
- :mod:`.kernel_template`: the warm process in the sandbox that forks grading kernels;
- :mod:`.forkserver`: the template started, and kernels forked from it;
- :mod:`.kernels`: jupyter_client's kernel manager, starting kernels in the sandbox or by a fork;
- :mod:`.recorder`: the kernel's half of the judge, run there as text (with :mod:`.wire`, the messages;
  :mod:`.lent`, what the grader lends; :mod:`.operations`, one handler for each request).
"""
