"""Stage 3, judging: the grader's side of each test cell, outside the student's kernel.

- :mod:`.lending`: what the kernel may ask of the grader's objects (an allow-list);
- :mod:`.judge`: test cells run against the kernel's proxies, and the kernel's messages answered;
- :mod:`.judge_box`: each notebook's judge in a sandboxed process of its own.
"""
