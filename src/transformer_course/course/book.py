"""``make book``: a static HTML book: the guides (``docs/``, ``CONTRIBUTING.md``), then the
executed solution notebooks.

Jupyter Book 1 (Sphinx + MyST-NB) renders ``solutions/*.ipynb`` as they are committed: no
notebook is executed again, so the book shows the same figures and training run as the
repository. The guides are the Markdown pages GitHub shows too; links between them stay links
in the book, links to the repository's other files go to GitHub, and a link that leads nowhere
fails the build. Output: ``build/book/_build/html/index.html``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from transformer_course.course import mathjax
from transformer_course.layout import GITHUB_REPO, Repo

GITHUB_BLOB = f"https://github.com/{GITHUB_REPO}/blob/main"

NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve".split()
INTRO = """# Build a Transformer

{count} notebooks that build the Transformer of *Attention Is All You Need* (Vaswani et al.,
2017) piece by piece in PyTorch, train it to translate German to English on Multi30k, then turn
it into a modern decoder (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention, a
key/value cache, sampling).
The guides come first (for students, for instructors, the grader, benchmarks, contributing),
then the **solution notebooks, executed**: every exercise answered, every figure and
the training run as the course ships them. To work the exercises yourself, open the student
notebooks in `course/` (JupyterLab, Colab or Binder: see the repository's README).

```{tableofcontents}
```
"""


def _title(notebook: Path) -> str:
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return notebook.stem


# The guides, in the book's order: (source in the repository, page name in the book).
GUIDES = [("docs/students.md", "students"), ("docs/instructors.md", "instructors"), ("docs/grader.md", "grader"),
          ("docs/lms.md", "lms"), ("docs/lms-files.md", "lms-files"), ("docs/lti.md", "lti"),
          ("docs/lti-admin.md", "lti-admin"),
          ("docs/benchmarks.md", "benchmarks"), ("CONTRIBUTING.md", "contributing")]


def guide_text(repo: Repo, source: str) -> str:
    """A guide's Markdown for the book: links to other guides point to their pages, links to the
    repository's other files to GitHub."""
    folder = (repo.root / source).parent
    pages = {(repo.root / path).resolve(): name for path, name in GUIDES}
    pages[(repo.root / "docs" / "README.md").resolve()] = "intro"

    def link(match: re.Match) -> str:
        path, _, anchor = match.group(1).partition("#")
        if not path or re.match(r"^[a-z]+:", path):
            return match.group(0)
        found = (folder / path).resolve()
        anchor = f"#{anchor}" if anchor else ""
        if found in pages:
            return f"]({pages[found]}.md{anchor})"
        return f"]({GITHUB_BLOB}/{found.relative_to(repo.root.resolve()).as_posix()}{anchor})"

    return re.sub(r"\]\(([^)\s]+)\)", link, (repo.root / source).read_text())


def write_sources(repo: Repo, src: Path) -> list[str]:
    """The book's source folder: config, table of contents, intro, the guides and the solution
    notebooks. Returns the chapter names, in course order."""
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    for source, name in GUIDES:
        (src / f"{name}.md").write_text(guide_text(repo, source))
    chapters = []
    for assignment in repo.assignments():
        notebook = repo.solutions / f"{assignment.notebook}.ipynb"
        # The banner's link to the student notebook is relative to the repository; the book
        # lives elsewhere, so it points at the repository on GitHub.
        text = notebook.read_text().replace("](../course/", f"]({GITHUB_BLOB}/course/")
        (src / notebook.name).write_text(text)
        chapters.append(notebook.stem)
    local_mathjax = mathjax.install(src / "_static" / "mathjax")  # formulas render offline
    (src / "intro.md").write_text(INTRO.replace("{count}", NUMBERS[len(chapters)].capitalize()))
    (src / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n  - caption: Guides\n    chapters:\n"
        + "".join(f"      - file: {name}\n" for _, name in GUIDES)
        + "  - caption: The notebooks\n    chapters:\n" + "".join(f"      - file: {c}\n" for c in chapters))
    (src / "_config.yml").write_text(
        "title: Build a Transformer\n"
        "author: The transformer-course authors\n"
        "only_build_toc_files: true\n"
        "execute:\n  execute_notebooks: 'off'\n"
        "sphinx:\n  config:\n    html_show_copyright: false\n    suppress_warnings: ['mystnb.unknown_mime_type']\n"
        + (f"    html_static_path: ['_static']\n    mathjax_path: mathjax/{mathjax.SCRIPT}\n" if local_mathjax else "")
    )
    return chapters


def build_book(repo: Repo | None = None, out: Path | None = None) -> Path:
    """Build the book; returns the path of its first page.

    Raises:
        RuntimeError: Jupyter Book failed (its output is in the message).
    """
    repo = repo or Repo()
    out = out or repo.root / "build" / "book"
    src = out / "src"
    write_sources(repo, src)
    command = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(src), "--path-output", str(out),
               "--builder", "html", "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True)
    index = out / "_build" / "html" / "index.html"
    if result.returncode != 0 or not index.is_file():
        raise RuntimeError(f"jupyter-book failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    if broken := broken_links(index.parent, [name for _, name in GUIDES] + ["intro"]):
        raise RuntimeError("the book's guides link to pages or sections that are not there:\n  " + "\n  ".join(broken))
    return index


def broken_links(html: Path, pages: list[str]) -> list[str]:
    """Links of the built ``pages`` to a file of the book that is not there, or to an anchor that no
    element of its page has: ``page.html: target``."""
    found = []
    for page in pages:
        text = (html / f"{page}.html").read_text()
        for target in re.findall(r'href="([^"]+)"', text):
            if re.match(r"^[a-z]+:|^//", target) or target.startswith("_"):
                continue
            path, _, anchor = target.partition("#")
            file = html / path if path else html / f"{page}.html"
            if not file.is_file():
                found.append(f"{page}.html: {target}")
            elif anchor and f'id="{anchor}"' not in file.read_text():
                found.append(f"{page}.html: {target} (no such section)")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_course.course.book", description=__doc__)
    parser.add_argument("--out", default=None, help="output folder (default build/book)")
    args = parser.parse_args(argv)
    index = build_book(out=Path(args.out) if args.out else None)
    print(f"book: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
