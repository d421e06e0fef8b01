"""Stage 1, the submission: finding, reading and recognising what a student handed in.

- :mod:`.intake`: reading a hand-in without following anything (no link, no special file, a size cap);
- :mod:`.handin`: the (student, assignment) pairs, and which notebook of a folder is the assignment's;
- :mod:`.intact`: the notebook's nbgrader cell metadata put back as released, before nbgrader sees it.
"""
