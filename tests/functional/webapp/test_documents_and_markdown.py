"""The app's own upload and rendering calls: an unreadable document is refused by name before anything is
stored (no presigned URL is even asked for), and a model answer's Markdown comes back as inert HTML
(no script, no event handler, no javascript: link, no raw HTML, no image)."""
from __future__ import annotations

from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote

import pytest
from chalice.test import Client

from chalicelib.groups import create_app
from chalicelib.webapp import markdown, session, upstream
from tests.fixtures import documents
from tests.functional.conftest import Tenant

SAME = {"X-Requested-With": "app"}


@pytest.fixture
def app(stack: None) -> Client:
    return Client(create_app("app"))


def _upload(app: Client, token: str, name: str, data: bytes) -> Any:
    return app.http.post("/api/upload/conn_01ABCDEFGHJKMNPQRSTVWXYZ00", body=data, headers={
        **SAME, "Cookie": f"{session.ACCESS}={token}", "Content-Type": "application/octet-stream",
        "X-File-Name": quote(name)})


@pytest.mark.parametrize(("name", "data", "code", "words"), [
    ("scan.pdf", documents.scanned_pdf(), "no_text_layer", "no text layer"),
    ("locked.pdf", documents.encrypted_pdf(), "encrypted", "password-protected"),
    ("bomb.docx", documents.zip_bomb(250), "zip_bomb", "zip bomb"),
    ("empty.txt", b"", "empty_file", "0 bytes"),
    ("renamed.txt", documents.pdf(["x"]), "wrong_extension", "holds a PDF"),
    ("tool.exe", b"MZ", "unsupported_type", "not supported"),
    ("big.txt", b"a" * (upstream.MAX_UPLOAD_BYTES + 1), "too_large", "limited to 5 MiB"),
])
def test_unreadable_upload_refused_by_name_and_nothing_stored(app: Client, tenant: Tenant, monkeypatch: Any,
                                                              name: str, data: bytes, code: str, words: str) -> None:
    asked: list[Any] = []
    monkeypatch.setattr(upstream, "send", lambda *a, **k: asked.append(a))
    monkeypatch.setattr(upstream, "put_presigned", lambda *a, **k: asked.append(a) or 200)
    r = _upload(app, tenant.token, name, data)
    assert r.status_code in (413, 422), r.body
    assert r.json_body["code"] == code
    assert name in r.json_body["detail"] and words in r.json_body["detail"]
    assert asked == []  # neither the gateway nor the bucket was asked anything


def test_upload_needs_a_session_and_the_csrf_header(app: Client, tenant: Tenant) -> None:
    r = app.http.post("/api/upload/conn_x", body=b"hello", headers={"Content-Type": "application/octet-stream",
                                                                     "Cookie": f"{session.ACCESS}={tenant.token}"})
    assert r.status_code == 403
    assert _upload(app, "nope", "a.txt", b"hello").status_code == 401


ATTACKS = [
    "<script>window.pwned=1</script>",
    '<img src=x onerror="window.pwned=2">',
    "[click me](javascript:window.pwned=3)",
    '<a href="javascript:alert(1)">raw link</a>',
    "![img](https://evil.example/x.png)",
    "<iframe src=https://evil.example></iframe>",
    '<div style="position:fixed">raw html</div>',
    "[data](data:text/html;base64,PHNjcmlwdD4=)",
]


def test_markdown_renders_and_dangerous_input_stays_inert() -> None:
    html = markdown.render("# Title\n\n- **bold** item\n\n```python\nprint('<b>')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
                           "[docs](https://example.com/docs)")
    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html and "<table>" in html
    assert '<code class="language-python">print(\'&lt;b&gt;\')' in html
    assert '<a href="https://example.com/docs" rel="noopener noreferrer nofollow">docs</a>' in html
    for attack in ATTACKS:
        tags = _tags(markdown.render(attack))
        assert {t for t, _ in tags} <= {"p", "a"}, (attack, tags)
        for _, attrs in tags:
            assert all(not name.startswith("on") and name not in ("src", "style") for name, _ in attrs), attack
            assert all(value.startswith("https://") for name, value in attrs if name == "href"), attack


def _tags(html: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """Every element of ``html`` with its attributes (as a browser's parser would see them)."""
    found: list[tuple[str, list[tuple[str, str]]]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, [(k, v or "") for k, v in attrs]))

    Collect().feed(html)
    return found


def test_render_route_needs_a_session_and_checks_input(app: Client, tenant: Tenant) -> None:
    cookie = {"Cookie": f"{session.ACCESS}={tenant.token}", "Content-Type": "application/json"}
    r = app.http.post("/api/render", body='{"items": ["**a** <script>x()</script>"]}', headers={**SAME, **cookie})
    assert r.status_code == 200, r.body
    assert r.json_body["html"] == ["<p><strong>a</strong> &lt;script&gt;x()&lt;/script&gt;</p>\n"]
    assert app.http.post("/api/render", body='{"items": ["a"]}', headers=cookie).status_code == 403
    assert app.http.post("/api/render", body='{"items": ["a"]}', headers={**SAME, "Content-Type": "application/json"}
                         ).status_code == 401
    for bad in ('{"items": []}', '{"items": [1]}', '{"items": "a"}', "[]"):
        assert app.http.post("/api/render", body=bad, headers={**SAME, **cookie}).status_code == 400, bad
