"""`make book` builds a static HTML book of the executed solutions: every chapter, in course
order, with every figure of the notebooks."""

from __future__ import annotations

import re

import pytest

from transformer_course.book import build_book


@pytest.fixture(scope="module")
def book(repo, tmp_path_factory):
    return build_book(repo, tmp_path_factory.mktemp("book"))


def test_every_chapter_is_there_in_order(repo, book):
    html = book.parent
    chapters = [a.notebook for a in repo.assignments()]
    intro = (html / "intro.html").read_text()
    positions = [intro.find(f'href="{c}.html"') for c in chapters]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), positions
    for chapter in chapters:
        assert (html / f"{chapter}.html").is_file()


def test_every_figure_is_in_the_book(repo, book):
    html = book.parent
    for assignment in repo.assignments():
        notebook = (repo.solutions / f"{assignment.notebook}.ipynb").read_text()
        page = (html / f"{assignment.notebook}.html").read_text()
        images = re.findall(r'<img [^>]*src="([^"]+)"', page)
        assert len(images) == notebook.count('"image/png"'), assignment.name
        for src in images:
            assert (html / src).is_file(), src
        assert "Stuck on" in page and "<details>" in page  # the hints render as collapsible blocks


def test_math_renders_offline_and_links_leave_for_the_repository(repo, book):
    html = book.parent
    page = (html / "02_scaled_dot_product.html").read_text()
    scripts = re.findall(r'<script[^>]*src="([^"]*mathjax[^"]*)"', page, flags=re.I)
    assert scripts and not any(s.startswith(("http:", "https:", "//")) for s in scripts), scripts
    assert all((html / s.split("?")[0]).is_file() for s in scripts)
    assert (html / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()
    links = re.findall(r'href="([^"]*course/02_scaled_dot_product[^"]*)"', page)
    assert links and all(link.startswith("https://github.com/") for link in links), links
