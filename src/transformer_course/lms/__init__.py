"""The LMS at both ends of a class run: submission times and names in, grades, comments and feedback out.

- :mod:`.times`: where each hand-in's submission time came from (``times.csv`` beside ``students.csv``),
  and ``timestamp.txt``, the nbgrader exchange's own record of it, written from that source.
- :mod:`.push`: grades and comments out of a graded ``OUT``, compared with what an LMS holds (a
  ``Destination``), the dry run's table.
- :mod:`.canvas`: ``transformer-course canvas times|push``, Canvas's REST API through canvasapi.
"""
