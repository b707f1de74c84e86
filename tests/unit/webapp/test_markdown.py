"""Code highlighting in rendered answers: Pygments token classes only, and the sanitiser still keeps
nothing a browser would run, whatever the fenced code or its language name holds."""
from __future__ import annotations

from html.parser import HTMLParser

import pytest

from chalicelib.webapp import markdown


def _elements(html: str) -> list[tuple[str, dict[str, str]]]:
    found: list[tuple[str, dict[str, str]]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, {k: v or "" for k, v in attrs}))

    Collect().feed(html)
    return found


def _safe(html: str) -> None:
    for tag, attrs in _elements(html):
        assert tag in markdown.TAGS, (tag, html)
        assert set(attrs) <= markdown.ATTRIBUTES.get(tag, set()) | {"rel"}, (tag, attrs)
        if tag == "span":
            assert set(attrs["class"].split()) <= markdown.TOKEN_CLASSES, attrs


def test_known_language_is_highlighted_with_token_classes() -> None:
    html = markdown.render("```python\ndef f(x):\n    return '<b>'  # note\n```\n")
    assert html.startswith('<pre><code class="language-python"><span class="k">def</span>')
    assert '<span class="nf">f</span>' in html and '<span class="c1"># note</span>' in html
    assert "&lt;b&gt;" in html and "<b>" not in html
    assert "style" not in html
    _safe(html)


def test_unknown_or_missing_language_stays_plain_text() -> None:
    assert markdown.render("```nosuchlang\nx = 1\n```\n") == '<pre><code class="language-nosuchlang">x = 1\n</code></pre>\n'
    assert markdown.render("```\nx = 1\n```\n") == "<pre><code>x = 1\n</code></pre>\n"


def test_a_block_over_the_highlight_cap_is_not_highlighted() -> None:
    html = markdown.render("```python\n" + "x = 1\n" * (markdown.MAX_HIGHLIGHT // 6 + 1) + "```\n")
    assert "<span" not in html and html.startswith('<pre><code class="language-python">x = 1')


@pytest.mark.parametrize("fence", [
    "```html\n<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">\n```",
    "```js\ndocument.body.innerHTML = '<iframe src=javascript:alert(1)>'\n```",
    "```\"><script>window.pwned=3</script>\nplain\n```",
    "```python onmouseover=alert(1)\nprint(1)\n```",
    "```html style=\"position:fixed\"\n<a href=\"javascript:alert(1)\">x</a>\n```",
    "~~~svg\n<svg onload=alert(1)><script>alert(2)</script></svg>\n~~~",
])
def test_code_fences_with_markup_inside_stay_inert(fence: str) -> None:
    html = markdown.render(fence + "\n")
    _safe(html)
    tags = {t for t, _ in _elements(html)}
    assert tags <= {"pre", "code", "span"}, tags
    assert "<script" not in html and "<img" not in html and "<svg" not in html and "<iframe" not in html
    for _, attrs in _elements(html):
        if "class" in attrs and attrs["class"].startswith("language-"):
            assert attrs["class"][9:].replace("-", "").isalnum(), attrs


def test_a_span_class_not_from_the_highlighter_is_dropped() -> None:
    assert markdown._class_ok("span", "class", "k note evil") == "k"
    assert markdown._class_ok("span", "class", "note") is None
