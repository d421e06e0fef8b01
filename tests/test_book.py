"""`make book` builds a static HTML book of the executed solutions: every chapter, in course
order, with every figure of the notebooks."""

from __future__ import annotations

import re

import pytest

from transformer_course.course.book import GITHUB_BLOB, NUMBERS, build_book


@pytest.fixture(scope="module")
def book(repo, tmp_path_factory):
    return build_book(repo, tmp_path_factory.mktemp("book"))


def test_every_chapter_is_there_in_order(repo, book):
    html = book.parent
    chapters = [a.notebook for a in repo.assignments()]
    intro = (html / "intro.html").read_text()
    positions = [intro.find(f'href="{c}.html"') for c in chapters]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), positions
    assert f"{NUMBERS[len(chapters)].capitalize()} notebooks that build" in intro  # the count, not a number by hand
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


def test_the_guides_come_first_and_their_links_lead_somewhere(repo, book):
    from transformer_course.course.book import GUIDES

    html = book.parent
    intro = (html / "intro.html").read_text()
    order = [intro.find(f'href="{name}.html"') for _, name in GUIDES] + [intro.find('href="01_self_attention.html"')]
    assert all(p >= 0 for p in order) and order == sorted(order), order
    page = (html / "instructors.html").read_text()
    assert "Deadlines and late penalties" in page and 'href="grader.html"' in page
    assert f'href="{GITHUB_BLOB}/CONTRIBUTING.md"' not in page  # a guide of the book: its page, not GitHub


def test_a_broken_link_in_a_guide_is_found(tmp_path):
    from transformer_course.course.book import broken_links

    (tmp_path / "a.html").write_text('<h2 id="here">x</h2><a href="b.html#there">b</a><a href="#here">a</a>'
                                     '<a href="gone.html">c</a><a href="https://example.org/x.html">d</a>')
    (tmp_path / "b.html").write_text('<h2 id="elsewhere">b</h2>')
    assert broken_links(tmp_path, ["a"]) == ["a.html: b.html#there (no such section)", "a.html: gone.html"]


def test_guides_link_to_each_other_in_the_book_and_to_the_repository_on_github(repo):
    from transformer_course.course.book import guide_text

    text = guide_text(repo, "docs/students.md")
    assert "](benchmarks.md)" in text and "](intro.md)" in text
    assert f"]({GITHUB_BLOB}/solutions)" in text and "](../" not in text
