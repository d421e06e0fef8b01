"""What a student writes keeps no id, class, style, event handler or remote resource in a page
(src/transformer_course/grading/output/sanitise.py): generated hostile markdown and HTML (tags, attributes,
URLs with schemes in any case, entities, whitespace and control characters), cleaned in-process and
read back with html.parser. Also the outputs' metadata and MathJax's attribute macros. Fast: no kernel,
no grading; `HYPOTHESIS_PROFILE=long` for a longer run.
"""

from __future__ import annotations

import base64
import copy
import html
import re
from html.parser import HTMLParser

import nbformat
import pytest
from bs4 import BeautifulSoup
from hypothesis import example, given
from hypothesis import strategies as st
from nbconvert.exporters import HTMLExporter
from traitlets.config import Config

from transformer_course.grading.output import sanitise
from transformer_course.grading.output.memo import TEMPLATES, Memo
from transformer_course.grading.output.sanitise import ATTRIBUTES, TAGS, clean_html, render_markdown

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(40))).decode()
IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*")


class Page(HTMLParser):
    """Every start tag with its attributes, and the text (character references decoded), as a browser
    reads them."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.chunks.append(data)

    @property
    def text(self) -> str:
        return "".join(self.chunks)


def scheme(url: str) -> str:
    """The scheme a browser sees in ``url``: ASCII whitespace and control characters are not part of it
    (the URL standard strips them), case does not count; '' for a relative URL."""
    url = re.sub(r"[\x00-\x20\x7f]", "", url)
    head, colon, _ = url.partition(":")
    return head.lower() if colon and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", head) else ""


def assert_inert(cleaned: str) -> Page:
    """No element outside the allow-list, no id, class, style or on* attribute, no src that is not
    raster data, no href that is not http(s) or mailto: what a page may show of a student's writing."""
    page = Page(cleaned)
    for tag, attrs in page.elements:
        assert tag in TAGS, f"element <{tag}> is not in the allow-list: {cleaned!r}"
        for name, value in attrs.items():
            assert name not in ("id", "class", "style") and not name.startswith("on"), \
                f"<{tag} {name}={value!r}> survived: {cleaned!r}"
            assert name in ATTRIBUTES.get(tag, ()), f"<{tag} {name}> is not allowed: {cleaned!r}"
            if name == "src":
                assert IMAGE_DATA.fullmatch(value or ""), f"<{tag} src={value!r}> is not raster data"
            if name == "href":
                assert scheme(value or "") in ("http", "https", "mailto"), f"<a href={value!r}> survived"
                assert (value or "").strip().lower().startswith(("http", "mailto")), f"<a href={value!r}>"
    return page


# --- what a hostile student writes ---------------------------------------------------------------------

WORDS = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N"), include_characters=" .,!?"),
                min_size=1, max_size=30).filter(str.strip)
HOSTILE_NAMES = st.sampled_from([  # what formgrader's page is taken over with, more often than the rest
    *["id", "class", "style", "onclick"] * 4, "ID", "Class", "STYLE", "onerror", "onload", "OnClick",
    "onmouseover", "ontoggle",
    "src", "href", "srcset", "xlink:href", "formaction", "action", "background", "poster", "data", "lowsrc",
    "title", "alt", "width", "height", "align", "start", "open", "data-link", "tabindex", "autofocus"])
GRADE_IDS = st.sampled_from(["attention_why", "written_1", "cell-kept", "notebook", "statusmessage", "q2-comment"])
CLASSES = st.sampled_from(["modal-backdrop in", "navbar-fixed-top", "nbgrader_cell", "score tabbable",
                           "panel panel-primary", "hidden", "highlight", "k"])
SCHEMES = st.sampled_from(["javascript", "JaVaScRiPt", "vbscript", "data", "DATA", "file", "http", "https",
                           "HTTPS", "ftp", "mailto", "", "//"])


@st.composite
def hostile_url(draw) -> str:
    """A URL with a scheme in any case, written with entities, whitespace or control characters, or a
    data URL of any type (SVG and HTML included)."""
    kind = draw(st.sampled_from(["scheme", "data", "relative"]))
    if kind == "data":
        mime = draw(st.sampled_from(["image/png", "image/svg+xml", "text/html", "image/gif", "IMAGE/PNG",
                                     "image/jpeg", "application/javascript"]))
        encoding = draw(st.sampled_from([";base64", "", ";charset=utf-8;base64"]))
        url = f"data:{mime}{encoding},{draw(st.sampled_from([PNG, '<svg onload=alert(1)>', 'alert(1)']))}"
    elif kind == "relative":
        url = draw(st.sampled_from(["../../formgrader/api/grade/1", "#attention_why", "files/x.png", "x.png",
                                    "//evil.example/t.png", "/formgrader/submissions/1/next", "?a=1"]))
    else:
        name = draw(SCHEMES)
        url = f"{name}:alert(1)" if name.lower() in ("javascript", "vbscript") else \
            ("//evil.example/t.png" if name == "//" else f"{name}{':' if name else ''}//evil.example/t.png")
    trick = draw(st.sampled_from(["none", "entity", "hex-entity", "tab", "newline", "nul", "space", "named"]))
    if trick == "entity" and url:
        url = "".join(f"&#{ord(c)};" for c in url[:6]) + url[6:]
    elif trick == "hex-entity" and url:
        url = f"&#x{ord(url[0]):x};" + url[1:]
    elif trick in ("tab", "newline", "nul") and len(url) > 3:
        url = url[:3] + {"tab": "\t", "newline": "\n", "nul": "\x00"}[trick] + url[3:]
    elif trick == "space":
        url = " " + url
    elif trick == "named":
        url = url.replace(":", "&colon;", 1)
    return url


@st.composite
def hostile_attribute(draw) -> str:
    name = draw(HOSTILE_NAMES)
    if name.lower() in ("src", "href", "srcset", "xlink:href", "formaction", "action", "background", "poster",
                        "lowsrc", "data"):
        value = draw(hostile_url())
    elif name.lower() == "id":
        value = draw(GRADE_IDS)
    elif name.lower() == "class":
        value = draw(CLASSES)
    elif name.lower() == "style":
        value = "position:fixed;top:0;left:0;width:100%;height:100%;z-index:99999"
    else:
        value = draw(st.sampled_from(["alert(1)", "1 onerror=alert(1)", "100", "left", "x\" onerror=\"y"]))
    quote = draw(st.sampled_from(['"', "'", ""]))
    value = html.escape(value, quote=True) if quote == '"' else value
    if not quote and re.search(r"[\s\"'=<>`]", value):
        quote = '"'
        value = html.escape(value, quote=True)
    return f"{name}={quote}{value}{quote}"


TAG_NAMES = st.sampled_from(  # allowed containers more often: where an id, class or style would be kept
    sorted(TAGS) + ["div", "span", "a", "img", "p", "h2", "td"] * 4
    + ["script", "style", "iframe", "svg", "math", "form", "input", "button", "object", "embed", "link", "meta",
       "base", "video", "audio", "source", "SCRIPT", "Img", "DIV", "textarea", "select"])


@st.composite
def hostile_html(draw, depth: int = 0) -> tuple[str, list[str]]:
    """(HTML, the words in it that a page must keep): nested elements, allowed or not, with hostile
    attributes, around words."""
    words, parts = [], []
    for _ in range(draw(st.integers(1, 3))):
        if depth == 0 and not parts or depth < 3 and draw(st.booleans()):  # at least one element
            tag = draw(TAG_NAMES)
            attributes = " ".join(draw(st.lists(hostile_attribute(), max_size=4)))
            inner, inner_words = draw(hostile_html(depth + 1))
            if tag.lower() in ("script", "style", "textarea", "title", "iframe", "noscript", "xmp", "noembed",
                               "noframes", "plaintext", "select"):
                inner_words = []  # raw text or dropped content: nothing to keep
            if tag.lower() in ("table", "thead", "tbody", "tfoot", "tr"):
                # text straight inside a table is invalid HTML; html5lib's foster parenting inside a
                # paragraph drops it (a browser moves it before the table): text, never markup, so not kept
                inner_words = []
            words += inner_words
            parts.append(f"<{tag} {attributes}>{inner}</{tag}>")
        else:
            word = draw(WORDS)
            words.append(word)
            parts.append(html.escape(word))
    return " ".join(parts), words


@given(hostile_html())
def test_hostile_html_keeps_its_words_and_nothing_else(case):
    """Raw HTML (in a markdown cell, or an HTML output of the student's code): the words stay, as text;
    no element, attribute or URL outside the allow-list does."""
    source, words = case
    for cleaned in (clean_html(source), render_markdown(source)):
        text = " ".join(assert_inert(cleaned).text.split())
        for word in words:
            assert " ".join(word.split()) in text, f"{word!r} lost from {source!r}: {cleaned!r}"


@given(hostile_url(), WORDS)
def test_a_markdown_link_or_image_loads_nothing_and_runs_nothing(url, words):
    """``[words](url)`` and ``![words](url)``: a link stays only to http(s) or mailto, an image only as
    raster data written in the notebook itself (never fetched); the words stay, as link text or alt."""
    carried = IMAGE_DATA.fullmatch(html.unescape(url).strip()) is not None  # markdown trims it
    for source in (f"[{words}]({url})", f"![{words}]({url})", f"<{url}>", f"[{words}][r]\n\n[r]: {url}"):
        page = assert_inert(render_markdown(source))
        assert carried or not any(tag == "img" and attrs.get("src") for tag, attrs in page.elements), source
        if not source.startswith("<"):
            shown = page.text + " ".join(attrs.get("alt") or "" for tag, attrs in page.elements if tag == "img")
            assert " ".join(words.split()) in " ".join(shown.split()), (source, shown)


@given(GRADE_IDS, CLASSES, WORDS)
def test_a_heading_or_markup_named_like_the_formgraders_own_gets_no_id_or_class(grade_id, classes, words):
    """A heading's id would be its text (nbconvert's anchors): ``# attention_why`` must not give the page
    a second element with a score box's id; nor may ``{: #id}``-like raw markup."""
    source = (f"# {grade_id}\n\n## {words}\n\n<div id=\"{grade_id}\" class=\"{classes}\">{words}</div>\n\n"
              f"<span id={grade_id}-comment>x</span>")
    page = assert_inert(render_markdown(source))
    assert grade_id in page.text and " ".join(words.split()) in " ".join(page.text.split())
    assert [tag for tag, _ in page.elements][:2] == ["h1", "h2"]
    assert not any(tag == "a" for tag, _ in page.elements), "a heading's anchor link (pointing at an id)"


def test_what_the_renderer_adds_is_kept_without_attributes_a_student_could_forge():
    """Math stays as text for MathJax; a table's alignment is ``align``; fenced code is plain (no pygments
    classes: a student could write the same classes); an attachment is its raster data; an SVG
    attachment, a missing one and a remote image are their alt text."""
    source = ("Text $a<b$ and $$x^2$$ `x<0`\n\n| a | b |\n|:--|--:|\n| 1 | 2 |\n\n```python\ndef f(x):\n"
              "    return x<1\n```\n\n![pasted](attachment:p.png) ![drawn](attachment:d.svg) "
              "![gone](attachment:missing.png) ![remote](https://evil.example/t.png)")
    attachments = {"p.png": {"image/png": PNG, "image/svg+xml": "<svg/>"}, "d.svg": {"image/svg+xml": "<svg/>"}}
    cleaned = render_markdown(source, attachments)
    page = assert_inert(cleaned)
    assert "$a<b$" in page.text and "$$x^2$$" in page.text and "x<0" in page.text and "return x<1" in page.text
    assert ("th", {"align": "left"}) in page.elements and ("td", {"align": "right"}) in page.elements
    images = [attrs for tag, attrs in page.elements if tag == "img"]
    assert images == [{"src": f"data:image/png;base64,{PNG}", "alt": "pasted"}, {"alt": "drawn"}, {"alt": "gone"},
                      {"alt": "remote"}], images
    assert "<pre><code>def f(x):" in cleaned


MACROS = st.sampled_from(["cssId", "class", "style", "href", "bbox", "enclose", "mmlToken", "require", "data"])


@given(MACROS, GRADE_IDS, st.sampled_from(["plain", "entity", "raw-html"]))
def test_mathjax_gets_no_macro_that_sets_an_id_class_style_or_link(macro, grade_id, how):
    r"""``$\cssId{attention_why}{x}$`` would give MathJax's output the score box's id (and ``\class``,
    ``\style``, ``\bbox[...]`` a class or a style, ``\href`` a link): after cleaning, the text MathJax
    reads (entities decoded) holds none of these macros, and shows them with a look-alike backslash."""
    tex = f"\\{macro}{{{grade_id}}}{{x}}"
    # an HTML block (not parsed as markdown, so not escaped as math): the browser decodes &#92; to "\\"
    source = {"plain": f"${tex}$", "entity": f"<div>$&#92;{macro}{{{grade_id}}}{{x}}$</div>",
              "raw-html": f"<p>${tex}$</p>"}[how]
    page = assert_inert(render_markdown(source))
    assert not re.search(rf"\\{macro}(?![A-Za-z])", page.text), page.text
    assert f"\uff3c{macro}{{{grade_id}}}" in page.text, page.text


# --- the outputs of the student's code, through nbconvert's exporter with the course's configuration -------

@pytest.fixture(scope="module")
def exporter():
    config = Config()
    sanitise.configure(config)
    return HTMLExporter(config=config, template_name="classic")  # nbgrader's feedback and formgrade extend it


SIZES = st.one_of(st.integers(-5, 5000), st.sampled_from(["1 onerror=alert(1)", "2 style=position:fixed",
                                                          "100", "50%", "1\" onload=\"x", "", None, True]))


@given(SIZES, SIZES, hostile_url(), hostile_html())
def test_outputs_of_the_students_code_keep_no_handler_attribute_or_remote_image(exporter, width, height, url,
                                                                                  markup):
    """An image output whose metadata the student's code chose (``display(..., metadata=...)``: a width
    the templates write unquoted, ``filenames`` they write as ``src``), an HTML, markdown and LaTeX
    output: the page's cells carry no id, class or style of the student's and load nothing remote."""
    source, words = markup
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": PNG}, metadata={
            "image/png": {"width": width, "height": height}, "filenames": {"image/png": url}}),
        nbformat.v4.new_output("display_data", data={"text/html": source}),
        nbformat.v4.new_output("display_data", data={"text/markdown": source}),
        nbformat.v4.new_output("display_data", data={"text/latex": "$\\cssId{attention_why}{x}$"}),
    ]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    body, _ = exporter.from_notebook_node(notebook)
    outputs = body[body.index('<div class="output_area">'):]
    page = Page(outputs)
    for tag, attrs in page.elements:
        for name, value in attrs.items():
            assert not name.startswith("on"), f"<{tag} {name}={value!r}>"
            if name in ("src", "href"):
                assert scheme(value or "") in ("data", "http", "https", "mailto"), f"<{tag} {name}={value!r}>"
                assert tag != "img" or IMAGE_DATA.fullmatch(value or ""), f"<img src={value!r}>"
            if name in ("id", "style"):
                raise AssertionError(f"<{tag} {name}={value!r}> in an output")
            if name == "class":  # the template's own classes only: none of the student's
                assert not set((value or "").split()) & {"modal-backdrop", "navbar-fixed-top", "nbgrader_cell",
                                                         "score", "hidden", "highlight", "k", "in"}, value
        if tag == "img" and "width" in attrs:
            assert re.fullmatch(r"[0-9]+", attrs["width"] or ""), attrs
    assert "\\cssId" not in page.text
    text = " ".join(page.text.split())
    for word in words:
        assert " ".join(word.split()) in text, f"{word!r} lost"


JPEG = base64.b64encode(b"\xff\xd8\xff\xe0" + bytes(range(40))).decode()
ALTS = st.one_of(st.none(), st.just(""), WORDS, st.sampled_from(['"><b>x</b>', "a & b"]))


@pytest.fixture(scope="module")
def feedback_exporter():
    config = Config()
    sanitise.configure(config)
    return sanitise.FeedbackExporter(config=config, template_name="classic")


@given(hostile_html(), ALTS, ALTS, ALTS, st.booleans())
@example(("<SCRIPT >0</SCRIPT>", []), None, None, None, False)  # the long profile's find: 5 images, not 6
def test_a_feedback_page_is_the_page_nbconvert_writes_without_its_second_pass(
        exporter, feedback_exporter, markup, output_alt, cell_alt, markdown_alt, svg):
    """The feedback pages skip what nbconvert's HTMLExporter does to a page it has rendered (parse it again
    with BeautifulSoup, give each image without alt text a placeholder, write it out again): the same
    notebook gives the same page both ways, read back alike, and every image of it has alt text (its own, or
    nbconvert's placeholder). Images of every kind: outputs (PNG, JPEG, SVG) with or without alt text in
    the output's or the cell's metadata, and in markdown and HTML, written by hand or as an attachment."""
    source, _ = markup
    alt = "" if markdown_alt is None else f' alt="{html.escape(markdown_alt)}"'
    image = f'<img src="data:image/png;base64,{PNG}"{alt}>'
    cell = nbformat.v4.new_code_cell("x")
    if cell_alt is not None:
        cell.metadata["alt"] = cell_alt
    own = {} if output_alt is None else {"alt": output_alt}
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": PNG}, metadata={"image/png": dict(own)}),
        nbformat.v4.new_output("execute_result", data={"image/jpeg": JPEG}, metadata=dict(own), execution_count=1),
        nbformat.v4.new_output("display_data", data={"text/html": source + image}),
        nbformat.v4.new_output("display_data", data={"text/markdown": image + source}),
    ]
    if svg:
        cell.outputs.append(nbformat.v4.new_output("display_data", data={"image/svg+xml": "<svg></svg>"}))
    text = nbformat.v4.new_markdown_cell(f"{source}\n\n{image}\n\n![](attachment:a.png) ![x](attachment:a.png)")
    text.attachments = {"a.png": {"image/png": PNG}}
    notebook = nbformat.v4.new_notebook(cells=[text, cell])
    ours, _ = feedback_exporter.from_notebook_node(copy.deepcopy(notebook))
    theirs, _ = exporter.from_notebook_node(copy.deepcopy(notebook))
    assert str(BeautifulSoup(ours, features="html.parser")) == theirs
    images = [attrs for tag, attrs in Page(ours).elements if tag == "img"]
    # The four outputs' images at least; the markdown cell's three unless the markup opens a raw HTML block
    # that runs to the cell's end (`<SCRIPT >` without a lower-case `</script>`: mistune keeps the rest as
    # text), as it does in nbconvert's page too.
    assert len(images) == sum(tag == "img" for tag, _ in Page(theirs).elements) >= 4 + svg, images
    assert all(attrs.get("alt") is not None for attrs in images), images
    if output_alt is None and cell_alt is None:
        assert sum(attrs["alt"] == sanitise.NO_ALT_TEXT for attrs in images) >= 2 + svg, images
    own_alt = output_alt or cell_alt  # the PNG's (in its mime type's metadata) and the JPEG's (in its own)
    if own_alt:
        assert sum(html.unescape(attrs["alt"]) == own_alt for attrs in images) >= 2, (own_alt, images)


# --- the similarity pages: the one place that puts markup around a student's code ---------------------

CODE = st.lists(st.one_of(hostile_html().map(lambda case: case[0]), WORDS,
                          st.sampled_from(["def f(x):\n    return x", "'</pre><script>alert(1)</script>'",
                                           "# <img src=https://evil.example/t.png>", "x = '&lt;b&gt;'"])),
                min_size=1, max_size=4).map("\n".join)


@given(CODE, CODE)
def test_the_similarity_pages_show_a_students_code_as_text(a, b):
    """``side_by_side`` (the similarity pages' side-by-side view) marks matching tokens with the page's own
    ``<span class="hl">`` and nothing else: the code reads back, as text, exactly as written."""
    from transformer_course.instructors.equivalent import as_written, side_by_side

    for code, shown in zip((a, b), side_by_side(a, b, "", equivalent=False), strict=True):
        page = Page(shown)
        assert all(element == ("span", {"class": "hl"}) for element in page.elements), page.elements
        assert page.text == as_written(code)


# What every page of a class renders alike is rendered once a process (grading/output/memo.py): the same page.
CODE = st.one_of(st.text(max_size=200), st.sampled_from(["", "x = 1  # a", "%%bash\necho <b>", "def f(:\n  '''",
                                                          "import torch\nprint(torch.ones(2) @ torch.ones(2))"]))
LANGUAGES = st.sampled_from([None, "python", "ipython3", "ipython", "bash", "no-such-language"])


@pytest.mark.filterwarnings("ignore:No lexer found")
@given(CODE, LANGUAGES, st.sampled_from([None, {}, {"magics_language": "bash"}, {"magics_language": "html"}]))
def test_code_highlighted_once_is_highlighted_as_nbconvert_does_every_time(source, language, metadata):
    from nbconvert.filters.highlight import Highlight2HTML

    theirs = Highlight2HTML(pygments_lexer="ipython3")(source, language, metadata)
    ours = sanitise.Highlighted(pygments_lexer="ipython3")
    assert ours(source, language, metadata) == theirs
    assert ours(source, language, metadata) == theirs  # kept the first time, read the second
    assert sanitise.Highlighted(pygments_lexer="python")(source, None, metadata) == Highlight2HTML(
        pygments_lexer="python")(source, None, metadata)  # the lexer is part of the key


@given(st.one_of(hostile_html().map(lambda case: case[0]), st.text(max_size=200)), st.sampled_from(["", "a/b"]))
def test_markdown_rendered_once_is_rendered_as_the_first_time(source, path):
    first = sanitise._render_markdown(source, {}, path)
    assert render_markdown(source, None, path) == first
    assert render_markdown(source, {}, path) == first


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 40)), max_size=200), st.integers(10, 400))
def test_a_memo_gives_each_keys_value_and_keeps_within_its_budget(calls, budget):
    memo = Memo(budget)
    made = []
    for key, length in calls:
        value = memo.get((key, length), "k" * key, lambda k=key, n=length: made.append(k) or f"{k}:" + "v" * n)
        assert value == f"{key}:" + "v" * length
        assert memo.size == sum(size for _, size in memo.items.values()) <= budget
        assert all(size <= budget // 100 for _, size in memo.items.values())
    if calls:
        key, length = calls[-1]
        if key + len(f"{key}:") + length <= budget // 100:  # the last value fitted: it is kept, not made again
            memo.get((key, length), "", lambda: pytest.fail("made again although just kept"))


def test_a_second_feedback_page_compiles_no_template_and_is_the_same_page(monkeypatch):
    """nbgrader makes a new exporter for each notebook: its templates are compiled by the first alone."""
    import jinja2

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A *title*"),
                                               nbformat.v4.new_code_cell("print(1)")])
    config = Config()
    sanitise.configure(config)
    TEMPLATES.clear()
    first, _ = sanitise.FeedbackExporter(config=config, template_name="classic").from_notebook_node(
        copy.deepcopy(notebook))
    compiled = []
    compile_template = jinja2.Environment.compile
    monkeypatch.setattr(jinja2.Environment, "compile",
                        lambda *a, **k: compiled.append(a[1:2]) or compile_template(*a, **k))
    second, _ = sanitise.FeedbackExporter(config=config, template_name="classic").from_notebook_node(
        copy.deepcopy(notebook))
    assert second == first and "<h1>A <em>title</em></h1>" in second
    assert compiled == [], compiled
    TEMPLATES.clear()
    sanitise.FeedbackExporter(config=config, template_name="classic").from_notebook_node(copy.deepcopy(notebook))
    assert compiled  # without the cache each template is compiled again: the counting above can fail
