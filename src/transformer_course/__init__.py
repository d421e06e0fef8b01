"""Build, grade and self-check the Transformer course (nbgrader under the hood).

The pipeline: ``autograder/source/*/*.source.py`` (single source of truth)
-> ``build`` -> ``course/`` (student release) and ``solutions/`` (executed)
-> students hand in -> ``grade`` -> ``grades.csv``, ``exercises.csv``, feedback HTML.
"""

__version__ = "0.1.0"
