"""Instructors' tools on a graded class: the report, deadlines, similar answers, Gradescope, the
students' repository."""
