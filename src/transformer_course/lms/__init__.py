"""The LMS at both ends of a class run: submission times and names in, grades, comments and feedback out.

- :mod:`.times`: where each hand-in's submission time came from (``times.csv`` beside ``students.csv``),
  and ``timestamp.txt``, the nbgrader exchange's own record of it, written from that source.
"""
