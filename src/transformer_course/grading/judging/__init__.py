"""Stage 3, judging: the grader's side of each test cell, outside the student's kernel.

- :mod:`.lending`: what the kernel may ask of the grader's objects (an allow-list);
- :mod:`.sizes`: how large the tensors the kernel sends, and the calls it asks for, may be;
- :mod:`.decoding`: what the kernel sends, read back with its sizes bounded before it is built;
- :mod:`.remote`: the kernel's objects as proxies here, and its errors;
- :mod:`.values`: values between the grader and the kernel;
- :mod:`.handlers`: one handler for each kind of call back the kernel sends;
- :mod:`.link`: the link to one kernel: requests to its recorder, call backs answered;
- :mod:`.judge`: a test cell run here against the kernel's proxies;
- :mod:`.judge_process`: the judge of one notebook in the process that runs it (the worker's, or its box's);
- :mod:`.channel`: the line channel between the worker and a boxed judge, and the verdicts it accepts;
- :mod:`.judge_box`: each notebook's judge in a sandboxed process of its own.
"""
