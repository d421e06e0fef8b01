"""What a student wrote reaches an instructor's browser as text or as sanitised HTML, never live.

The answers in words are markdown the student writes, and markdown lets raw HTML through: nbconvert
renders it as it is (``<script>``, ``<img onerror=...>``, ``[x](javascript:...)``), and nbgrader's
feedback and formgrade templates render markdown cells without nbconvert's own ``sanitize_html``.
:func:`markdown2html` replaces nbconvert's ``markdown2html`` filter in the course's configuration
(:func:`.nbgrader_setup.make_config`, which the feedback of ``grade`` and the formgrader opened in
``OUT/nbgrader`` both read): the markdown is rendered as nbconvert renders it, then the HTML is
cleaned by nbconvert's :class:`~nbconvert.preprocessors.SanitizeHTML` (bleach) with an allow-list of the
elements markdown produces. Sanitising after rendering keeps what a sanitiser would break in the
source: ``$a < b$`` and code spans keep their ``<`` (bleach escapes it in text), ``>`` still starts a
quote. The outputs of the student's code are cleaned by nbconvert's templates themselves
(``HTMLExporter.sanitize_html``, set beside it: HTML outputs cleaned, JavaScript and widgets not
emitted).
"""

from __future__ import annotations

from functools import cache

from jinja2 import pass_context
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets.config import Config

# What rendered markdown is made of (mistune's elements, pygments' highlighted code, nbconvert's
# heading anchors), and nothing that runs or loads a page: no script, style, iframe, object, form, svg.
TAGS = ["a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
        "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span",
        "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul"]
# No event handler (on*), no style but a table cell's alignment (through bleach's CSS sanitiser);
# bleach keeps href and src only with http, https or mailto (no javascript:, data: or vbscript:).
ATTRIBUTES = {"*": ["class", "id", "title"], "a": ["href"], "img": ["src", "alt", "width", "height"],
              "ol": ["start"], "th": ["align", "style"], "td": ["align", "style"]}
STYLES = ["text-align"]


@cache
def _sanitiser() -> SanitizeHTML:
    return SanitizeHTML(tags=TAGS, attributes=ATTRIBUTES, styles=STYLES, strip=True, strip_comments=True)


def clean_html(text: str) -> str:
    """``text`` (HTML) with every element and attribute outside :data:`TAGS` and :data:`ATTRIBUTES`
    removed (a removed element's text stays, as text) and URLs of other schemes dropped."""
    return _sanitiser().sanitize_html_tags(text)


@pass_context
def markdown2html(context, source: str) -> str:
    """nbconvert's ``markdown2html`` filter (the same renderer: math, tables, highlighted code, the
    cell's attachments), its HTML cleaned by :func:`clean_html`. Takes the template's context (the
    cell, for its attachments) and the markdown; returns HTML safe to put in a page."""
    cell = context.get("cell", {}) or {}
    path = context.get("resources", {}).get("metadata", {}).get("path", "")
    renderer = IPythonRenderer(escape=False, attachments=cell.get("attachments", {}), path=path)
    return clean_html(MarkdownWithMath(renderer=renderer).render(source))


def configure(config: Config) -> None:
    """Set, in an nbgrader ``config``, what makes every HTML page nbconvert renders from a student's
    notebook safe: nbconvert's ``sanitize_html`` (HTML outputs cleaned, JavaScript and widget outputs
    not emitted) and :func:`markdown2html` in place of nbconvert's filter (nbgrader's feedback and
    formgrade templates render markdown cells with it, and never sanitise them)."""
    config.HTMLExporter.sanitize_html = True
    config.HTMLExporter.filters = {"markdown2html": f"{__name__}.markdown2html"}
