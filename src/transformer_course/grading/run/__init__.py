"""Stage 5, the class run: every (student, assignment) pair graded, and the class's records written.

- :mod:`.batch`: the run, in parallel through Dask, resumable;
- :mod:`.boundary`: the fault boundary of one pair: whatever its hand-in does, it is that pair's row;
- :mod:`.faults`: a fault of the output folder (full disk, read-only) said in one line, the run stopped;
- :mod:`.daskquiet`: the grading cluster's manners (Ctrl-C, no traceback, no worker left);
- :mod:`.classbook`: the graded class as nbgrader's formgrader sees it;
- :mod:`.publish`: the feedback pages' late banner and the tables an instructor reads.
"""
