# nbgrader configuration for instructors who use nbgrader directly with this folder as
# the course root (formgrader, `nbgrader generate_assignment`, ...). It is the same
# configuration `transformer-course build` and `grade` use.
# Run `transformer-course build` first: it writes source/*/*.ipynb from the .source.py files.
from pathlib import Path

from transformer_course.grading.notebook.nbgrader_setup import make_config
from transformer_course.layout import Repo

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)
_here = Path(__file__).resolve().parent
c.merge(make_config(_here, Repo(_here.parent)))
