"""Hidden reference implementation of the course exercises, and the checks hidden tests run.

Importable only by the grader and the build (they put ``autograder/reference`` on
``PYTHONPATH``); never shipped in ``course/``. Modules are named after the notebook
that defines each exercise, so later notebooks can be given the reference code of the
earlier ones only.
"""
