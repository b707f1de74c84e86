"""Model answers as safe HTML: Markdown rendered by ``markdown-it-py`` (CommonMark + tables and
strikethrough, raw HTML off: a ``<script>`` in an answer stays text) and then sanitised by ``nh3``
(Ammonia): an allow-list of tags, no attribute but ``href``/``title`` on links and a ``language-*``
class on code, link schemes ``http``, ``https`` and ``mailto`` only (``javascript:`` and ``data:`` links
lose their ``href``), every link ``rel="noopener noreferrer nofollow"``. No image is kept (an answer
cannot make the browser fetch anything). The page's CSP (``script-src 'self'``, no inline) is the
second wall.
"""
from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

from chalicelib.core.process_state import cached

MAX_CHARS = 64_000
MAX_ITEMS = 100
TAGS = {"p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li", "a",
        "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "span"}
ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}
URL_SCHEMES = {"http", "https", "mailto"}


@cached(maxsize=1, derived=True)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = lambda url: url.strip().lower().startswith(("http://", "https://", "mailto:", "#", "/"))
    return md


def _class_ok(tag: str, attr: str, value: str) -> str | None:
    if tag == "code" and attr == "class":
        kept = [c for c in value.split() if c.startswith("language-") and c[9:].replace("-", "").isalnum()]
        return " ".join(kept) or None
    return value


def render(text: str) -> str:
    """Sanitised HTML of one Markdown answer."""
    html = _parser().render(text[:MAX_CHARS])
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES, link_rel="noopener noreferrer nofollow",
                     attribute_filter=_class_ok, strip_comments=True)
