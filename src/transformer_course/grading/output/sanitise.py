"""What a student wrote reaches an instructor's browser as text or as sanitised HTML, never live, and
keeps nothing that could pass for the page's own markup.

The answers in words are markdown the student writes, and markdown lets raw HTML through: nbconvert
renders it as it is (``<script>``, ``<img onerror=...>``, ``[x](javascript:...)``), and nbgrader's
feedback and formgrade templates render markdown cells without nbconvert's own ``sanitize_html``.
:func:`markdown2html` replaces nbconvert's ``markdown2html`` filter in the course's configuration
(:func:`.nbgrader_setup.make_config`, which the feedback of ``grade`` and the formgrader opened in
``OUT/nbgrader`` both read), and :func:`clean_html` replaces nbconvert's ``clean_html`` filter, which
the templates apply to the HTML and markdown outputs of the student's code when ``sanitize_html`` is on
(nbconvert's own keeps ``id`` and ``class`` on every element).

Both clean with bleach and one explicit allow-list (:data:`TAGS`, :data:`ATTRIBUTES`): no ``id``,
``class`` or ``style`` on any element, because the formgrader's script finds each score box by its id
(``$("#" + grade_id)``, the first element with it wins) and Bootstrap's classes can cover the page; no
event handler; links only to ``http``, ``https`` or ``mailto`` (they load nothing until clicked); images
only as data the notebook carries (``data:image/png|jpeg|gif;base64``: a cell's attachments, which the
renderer turns into such URLs), never remote, relative or SVG, so opening a page fetches nothing a
student chose. What the renderer itself would add is left out where a student could forge it: headings
get no id and no anchor link (a heading's id is its text), and fenced code is plain ``<pre><code>``
without pygments' classes (code *cells* keep their highlighting: the templates highlight them from the
source, escaped, outside this filter). A table column's alignment is kept as the ``align`` attribute.

MathJax typesets the ``$...$`` left as text, and its TeX has macros that set an element's id, class,
style or link (``\\cssId``, ``\\class``, ``\\style``, ``\\href``, ``\\bbox``...): their backslash is
replaced in the text by a look-alike (U+FF3C), so they show as written and do nothing.

Sanitising after rendering keeps what a sanitiser would break in the source: ``$a < b$`` and code spans
keep their ``<`` (bleach escapes it in text), ``>`` still starts a quote.
"""

from __future__ import annotations

import html
import re
from functools import cache

import bleach
from bleach import html5lib_shim
from jinja2 import pass_context
from markupsafe import escape
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters import get_metadata
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool
from traitlets.config import Config

from transformer_course.grading.output.memo import TEMPLATES, Memo

# What rendered markdown is made of (mistune's elements) and the plain formatting raw HTML in a
# markdown cell commonly uses; nothing that runs, loads or styles: no script, style, link, iframe,
# object, form, input, svg, math, base or meta.
TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span",
    "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul"})
# Per tag; none on any tag (no "*"): no id, class, style or on*.
ATTRIBUTES = {"a": {"href", "title"}, "abbr": {"title"}, "img": {"src", "alt", "title", "width", "height"},
              "ol": {"start"}, "th": {"align"}, "td": {"align"}}
LINK_SCHEMES = frozenset({"http", "https", "mailto"})
# An image is data the notebook carries: raster formats only (an SVG is a document, with links of its own).
IMAGE_DATA = re.compile(r"data:image/(?:png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*", re.ASCII)
NUMBER = re.compile(r"[0-9]{1,6}", re.ASCII)
ALIGN = frozenset({"left", "center", "right"})
# MathJax TeX macros that put an attribute, a style, a link or a load into the page (html and bbox
# extensions, \enclose's and \mmlToken's attributes, \require's extensions).
TEX_ATTRIBUTE_MACROS = re.compile(r"\\(?=(?:cssId|class|style|href|url|data|bbox|enclose|mmlToken|require)"
                                  r"(?![A-Za-z]))")
LOOK_ALIKE_BACKSLASH = "\uff3c"
# nbconvert's alt text for an image that has none (nbconvert/exporters/html.py, HTMLExporter.from_notebook_node).
NO_ALT_TEXT = "No description has been provided for this image"


def _normalised_url(value: str) -> str:
    """``value`` as a browser reads its scheme: entities decoded, whitespace, control and non-ASCII
    characters dropped, lower case (bleach's own normalisation)."""
    value = html5lib_shim.convert_entities(value)
    value = re.sub(r"[`\000-\040\177-\240\s]+", "", value)
    return re.sub(r"[^\x00-\x7f]", "", value).lower()


def _allowed_attribute(tag: str, name: str, value: str) -> bool:
    """bleach's attribute filter: ``name`` is in :data:`ATTRIBUTES` for ``tag`` and its value is of the
    kind allowed (a link's scheme, an image's data, a number, an alignment)."""
    if name not in ATTRIBUTES.get(tag, ()):
        return False
    if tag == "a" and name == "href":
        scheme, colon, rest = _normalised_url(value).partition(":")
        return bool(colon and rest) and scheme in LINK_SCHEMES
    if tag == "img" and name == "src":
        return IMAGE_DATA.fullmatch(html5lib_shim.convert_entities(value).strip()) is not None
    if name in ("width", "height", "start"):
        return NUMBER.fullmatch(value.strip()) is not None
    if name == "align":
        return value.strip().lower() in ALIGN
    return True  # title, alt: text


class NeutraliseTeXAttributes(html5lib_shim.Filter):
    """An html5lib filter over bleach's output: text (entities decoded, so ``\\&#99;ssId`` is seen as
    ``\\cssId``) with the backslash of :data:`TEX_ATTRIBUTE_MACROS` replaced by a look-alike."""

    TEXT = ("Characters", "SpaceCharacters", "Entity")

    def __iter__(self):
        text: list[str] = []
        for token in super().__iter__():
            if token["type"] in self.TEXT:
                text.append(html.unescape(f"&{token['name']};") if token["type"] == "Entity" else token["data"])
                continue
            if text:
                yield {"type": "Characters", "data": TEX_ATTRIBUTE_MACROS.sub(LOOK_ALIKE_BACKSLASH, "".join(text))}
                text = []
            yield token
        if text:
            yield {"type": "Characters", "data": TEX_ATTRIBUTE_MACROS.sub(LOOK_ALIKE_BACKSLASH, "".join(text))}


class AltText(html5lib_shim.Filter):
    """An html5lib filter over bleach's output: an image without alt text gets :data:`NO_ALT_TEXT` (what a
    screen reader says for it), as nbconvert gives every image of a page it renders."""

    def __iter__(self):
        for token in super().__iter__():
            if token["type"] in ("StartTag", "EmptyTag") and token["name"] == "img" and not any(
                    name == "alt" for (_, name) in token["data"]):
                token["data"][(None, "alt")] = NO_ALT_TEXT
            yield token


@cache
def _cleaner() -> bleach.Cleaner:
    return bleach.Cleaner(tags=TAGS, attributes=_allowed_attribute, protocols={*LINK_SCHEMES, "data"},
                          strip=True, strip_comments=True, filters=[NeutraliseTeXAttributes, AltText])


def clean_html(text: str | bytes) -> str:
    """``text`` (HTML) with every element outside :data:`TAGS` removed (its text stays, as text), every
    attribute outside :data:`ATTRIBUTES` or with a value not allowed dropped, and MathJax's attribute
    macros neutralised. Also nbconvert's ``clean_html`` filter (the outputs of the student's code)."""
    return _cleaner().clean(text.decode() if isinstance(text, bytes) else str(text))


class PageRenderer(IPythonRenderer):
    """nbconvert's renderer (math, tables, attachments) without what a student could forge or load:
    headings with no id or anchor, code blocks with no highlighting classes, a table cell's alignment as
    ``align``, attachments as raster data only (a missing one is its alt text, not an error)."""

    def __init__(self, attachments: dict | None = None, path: str = ""):
        super().__init__(escape=False, exclude_anchor_links=True, attachments=attachments or {}, path=path)

    def heading(self, text: str, level: int, **attrs) -> str:
        return f"<h{level}>{text}</h{level}>\n"

    def block_code(self, code: str, info: str | None = None) -> str:
        return f"<pre><code>{escape(code)}</code></pre>\n"

    def _embed_image_or_attachment(self, src: str) -> str:
        if not src.startswith("attachment:"):
            return src  # a URL: the cleaner drops it
        bundle = self.attachments.get(src[len("attachment:"):])
        for mime in ("image/png", "image/jpeg", "image/gif"):
            if isinstance(bundle, dict) and mime in bundle:
                data = bundle[mime]
                return f"data:{mime};base64,{''.join(data) if isinstance(data, list) else data}"
        return ""


def _table_cell(renderer, text: str, align: str | None = None, head: bool = False) -> str:
    tag, aligned = ("th" if head else "td"), f' align="{align}"' if align in ALIGN else ""
    return f"  <{tag}{aligned}>{text}</{tag}>\n"


_MARKDOWN = Memo()


def render_markdown(source: str, attachments: dict | None = None, path: str = "") -> str:
    """``source`` (markdown) rendered by :class:`PageRenderer` and cleaned by :func:`clean_html`: HTML
    safe to put in a page. ``attachments``: the cell's (``{name: {mime: base64}}``). A cell without
    attachments is rendered once a process (:class:`.memo.Memo`): the release's text is in every page."""
    if not attachments:
        return _MARKDOWN.get((source, path), source, lambda: _render_markdown(source, {}, path))
    return _render_markdown(source, attachments, path)


def _render_markdown(source: str, attachments: dict, path: str) -> str:
    renderer = PageRenderer(attachments=attachments, path=path)
    markdown = MarkdownWithMath(renderer=renderer)
    renderer.register("table_cell", _table_cell)  # after the table plugin registered its own
    return clean_html(markdown.render(source))


@pass_context
def markdown2html(context, source: str) -> str:
    """nbconvert's ``markdown2html`` filter, made with :func:`render_markdown`. Takes the template's
    context (the cell, for its attachments) and the markdown; returns HTML safe to put in a page."""
    cell = context.get("cell", {}) or {}
    path = context.get("resources", {}).get("metadata", {}).get("path", "")
    return render_markdown(source, cell.get("attachments", {}) or {}, path)


class PageOutputs(Preprocessor):
    """The outputs' metadata as the templates may write it into a page. The student's code chooses an
    output's metadata (``display(..., metadata=...)``), and nbconvert's templates write an image's
    ``width`` and ``height`` unquoted (``width=1 onerror=...`` is an event handler) and
    ``metadata.filenames`` as the image's ``src`` (a remote image): only whole numbers stay for the first,
    the second goes. A ``text/latex`` output, typeset by MathJax, has its attribute macros neutralised
    (:data:`TEX_ATTRIBUTE_MACROS`). A PNG or JPEG output without alt text (its own or its cell's) gets
    :data:`NO_ALT_TEXT`."""

    enabled = Bool(True)  # nbconvert registers preprocessors disabled unless they say otherwise

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            metadata = output.get("metadata")
            if isinstance(metadata, dict):
                metadata.pop("filenames", None)
                for mime, entry in list(metadata.items()):
                    if isinstance(entry, dict):
                        metadata[mime] = {key: value for key, value in entry.items()
                                          if key not in ("width", "height") or _whole_number(value)}
            data = output.get("data")
            if isinstance(data, dict) and isinstance(data.get("text/latex"), str):
                data["text/latex"] = TEX_ATTRIBUTE_MACROS.sub(LOOK_ALIKE_BACKSLASH, data["text/latex"])
            if isinstance(data, dict) and output.get("output_type") in ("display_data", "execute_result"):
                for mime in ("image/png", "image/jpeg"):  # the templates' <img> outputs: alt text from here
                    entry = output.setdefault("metadata", {}).get(mime, {})
                    # The template's alt text: the output's (its mime type's, else its own), else the cell's.
                    if (mime in data and isinstance(entry, dict)
                            and (get_metadata(output, "alt", mime) or get_metadata(cell, "alt")) is None):
                        output.metadata[mime] = {**entry, "alt": NO_ALT_TEXT}
        return cell, resources


_HIGHLIGHTED = Memo()


class Highlighted(Highlight2HTML):
    """nbconvert's highlighting of code cells, each source highlighted once a process in each language
    (:class:`.memo.Memo`): the cells the release gives are in every student's page."""

    def __call__(self, source, language=None, metadata=None):
        magics = metadata.get("magics_language") if isinstance(metadata, dict) else None  # all it reads there
        key = (source, language or self.pygments_lexer, magics, repr(sorted(self.extra_formatter_options.items())))
        return _HIGHLIGHTED.get(key, source, lambda: super(Highlighted, self).__call__(source, language, metadata))


def _whole_number(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or (
        isinstance(value, str) and NUMBER.fullmatch(value) is not None)


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTMLExporter for the feedback pages, without the pass nbconvert makes over every page
    it has rendered: it parses the page again (BeautifulSoup) to give images without alt text a
    placeholder and the JupyterLab template's cells a ``tabindex``, and writes it out again, which costs
    about as much CPU time as rendering the page. The feedback template is the classic one, which has none
    of those cells, and every image already has alt text (:class:`PageOutputs` for outputs, :class:`AltText`
    in markdown): the page is the same page (tests/test_pages.py parses both). Its templates are compiled
    once a process (:data:`.memo.TEMPLATES`), and its code cells highlighted by :class:`Highlighted`."""

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = TEMPLATES
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        outputs = [output for cell in nb.cells for output in cell.get("outputs", [])]
        if any("image/svg+xml" in (output.get("data") or {}) for output in outputs):
            return super().from_notebook_node(nb, resources, **kw)  # the template's SVG image has no alt text
        language = nb.metadata.get("language_info", {})
        lexer = language.get("pygments_lexer", language.get("name", None))
        # As HTMLExporter.from_notebook_node registers them before it renders.
        self.register_filter("highlight_code", self.filters.get(
            "highlight_code", Highlighted(pygments_lexer=lexer, parent=self)))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        return TemplateExporter.from_notebook_node(self, nb, resources, **kw)


def configure(config: Config) -> None:
    """Set, in an nbgrader ``config``, what makes every HTML page nbconvert renders from a student's
    notebook safe: nbconvert's ``sanitize_html`` (HTML outputs cleaned, JavaScript and widget outputs
    not emitted) with :func:`clean_html` as its cleaner, and :func:`markdown2html` in place of
    nbconvert's filter (nbgrader's feedback and formgrade templates render markdown cells with it, and
    never sanitise them), and :class:`PageOutputs` over the outputs' metadata. The feedback pages are
    written by :class:`FeedbackExporter`."""
    config.HTMLExporter.sanitize_html = True
    config.HTMLExporter.preprocessors = [f"{__name__}.PageOutputs"]
    config.HTMLExporter.filters = {"markdown2html": f"{__name__}.markdown2html", "clean_html": f"{__name__}.clean_html"}
    config.GenerateFeedback.exporter_class = FeedbackExporter
