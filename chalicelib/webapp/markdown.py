"""Model answers as safe HTML: Markdown rendered by ``markdown-it-py`` (CommonMark + tables and
strikethrough, raw HTML off: a ``<script>`` in an answer stays text) and then sanitised by ``nh3``
(Ammonia): an allow-list of tags, no attribute but ``href``/``title`` on links, a ``language-*``
class on code and a Pygments token class on spans, link schemes ``http``, ``https`` and ``mailto`` only
(``javascript:`` and ``data:`` links lose their ``href``), every link ``rel="noopener noreferrer nofollow"``.
No image is kept (an answer cannot make the browser fetch anything). The page's CSP (``script-src
'self'``, no inline) is the second wall.

Fenced code naming a language Pygments knows (by name or alias, never guessed) is highlighted here:
the lexer's tokens become ``<span class="k">`` and the like (class names only, no inline style; the
colours are ``static/app.css``'s). An unknown language, or a block over ``MAX_HIGHLIGHT`` characters,
stays plain escaped text.
"""
from __future__ import annotations

import nh3
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

from chalicelib.core.process_state import cached

MAX_CHARS = 64_000
MAX_ITEMS = 100
MAX_HIGHLIGHT = 20_000
TAGS = {"p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li", "a",
        "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "span"}
ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "span": {"class"}, "ol": {"start"}, "th": {"align"},
              "td": {"align"}}
URL_SCHEMES = {"http", "https", "mailto"}
TOKEN_CLASSES = frozenset(c for c in STANDARD_TYPES.values() if c)


def _highlight(code: str, lang: str, _attrs: str) -> str:
    """Token spans of ``code`` (markdown-it wraps them in ``<pre><code class="language-…">``), or "" for
    markdown-it's own escaping."""
    if not lang or len(code) > MAX_HIGHLIGHT:
        return ""
    try:
        lexer = get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return ""
    return highlight(code, lexer, HtmlFormatter(nowrap=True))


@cached(maxsize=1, derived=True)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False, "highlight": _highlight})
    md.enable(["table", "strikethrough"])
    md.validateLink = lambda url: url.strip().lower().startswith(("http://", "https://", "mailto:", "#", "/"))
    return md


def _class_ok(tag: str, attr: str, value: str) -> str | None:
    if tag == "code" and attr == "class":
        kept = [c for c in value.split() if c.startswith("language-") and c[9:].replace("-", "").isalnum()]
        return " ".join(kept) or None
    if tag == "span" and attr == "class":
        return " ".join(c for c in value.split() if c in TOKEN_CLASSES) or None
    return value


def render(text: str) -> str:
    """Sanitised HTML of one Markdown answer."""
    html = _parser().render(text[:MAX_CHARS])
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES, link_rel="noopener noreferrer nofollow",
                     attribute_filter=_class_ok, strip_comments=True)
