"""The app's own upload and rendering calls: the caller's right on the connector is checked (by the real
gateway routes) before the body is read, a declared size over the cap is refused before anything else, no
document parser runs in the route (the sync worker parses, within bounds), a file refused by the checks
that need no parser is named and nothing is stored; and a model answer's Markdown comes back as inert HTML
(no script, no event handler, no javascript: link, no raw HTML, no image)."""
from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote

import pytest
import requests
from chalice import app as chalice_app
from chalice.test import Client

from chalicelib.core.config import settings
from chalicelib.gateway.ingest.sources import document_text
from chalicelib.gateway.ingest.sources.bounded_parser import BoundedParser
from chalicelib.groups import create_app
from chalicelib.webapp import markdown, session, upstream
from tests.fixtures import documents
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.gateway.sync_helpers import drain, token_for

SAME = {"X-Requested-With": "app"}


@pytest.fixture
def app(stack: None) -> Client:
    return Client(create_app("app"))


def _upload(app: Client, token: str, name: str, data: bytes, connector_id: str = "conn_01ABCDEFGHJKMNPQRSTVWXYZ00",
            headers: dict[str, str] | None = None) -> Any:
    return app.http.post(f"/api/upload/{connector_id}", body=data, headers={
        **SAME, "Cookie": f"{session.ACCESS}={token}", "Content-Type": "application/octet-stream",
        "X-File-Name": quote(name), **(headers or {})})


@pytest.fixture
def gateway(stack: None, monkeypatch: Any) -> dict[str, Any]:
    """The app's calls to the gateway answered by the real gateway routes in process, and its PUT to the
    presigned address sent to the (moto) bucket; records what was asked and how often the body was read."""
    gw = Client(create_app("gateway"))
    seen: dict[str, Any] = {"asked": [], "stored": [], "body_reads": 0}

    def send(method: str, url: str, token: str | None, body: bytes | None, headers: dict[str, str]) -> upstream.Answer:
        path = url[len(settings().gateway_url):]
        seen["asked"].append((method, path))
        r = gw.http.request(method, path, body=body or b"", headers={**headers, "Authorization": f"Bearer {token}"})
        return upstream.Answer(r.status_code, r.body, dict(r.headers))

    def put(url: str, data: bytes, content_type: str) -> int:
        seen["stored"].append(url.split("?")[0])
        return requests.put(url, data=data, headers={"Content-Type": content_type}, timeout=10).status_code

    raw_body = chalice_app.Request.raw_body

    def counted(request: Any) -> bytes:
        if (request.context or {}).get("resourcePath", "").startswith("/api/upload/"):  # the app's, not the gateway's
            seen["body_reads"] += 1
        return raw_body.fget(request)  # type: ignore[attr-defined, no-any-return]

    monkeypatch.setattr(upstream, "send", send)
    monkeypatch.setattr(upstream, "put_presigned", put)
    monkeypatch.setattr(chalice_app.Request, "raw_body", property(counted))
    return seen


def _no_parser(monkeypatch: Any) -> None:
    """Fail the test if any document parser runs (the upload route never parses; the sync worker does)."""
    def refuse(*_: Any, **__: Any) -> Any:
        pytest.fail("a document parser ran in the upload route")

    for name in ("_pdf", "_docx", "_html", "extract"):
        monkeypatch.setattr(document_text, name, refuse)
    monkeypatch.setattr(BoundedParser, "extract", refuse)


def _documents_connector(tenant: Tenant) -> str:
    gw = Client(create_app("gateway"))
    r = gw.http.post("/v1/connectors", body=json.dumps({"name": "Uploaded documents", "kind": "documents",
                                                          "config": {}}),
                     headers={"Authorization": f"Bearer {tenant.token}", "Content-Type": "application/json"})
    assert r.status_code == 201, r.body
    return str(r.json_body["id"])


@pytest.mark.parametrize("who", ["viewer", "member", "outsider"])
def test_caller_without_the_right_is_refused_before_the_body_is_read(app: Client, tenant: Tenant, gateway: dict,
                                                                    monkeypatch: Any, who: str) -> None:
    conn = _documents_connector(tenant)
    token = make_tenant("outsider@example.com", name="Other").token if who == "outsider" else token_for(tenant, who)
    _no_parser(monkeypatch)
    r = _upload(app, token, "pages.pdf", documents.shared_stream_pdf(), conn)
    assert r.status_code == (404 if who == "outsider" else 403), r.body
    assert gateway["asked"] == [("POST", f"/v1/connectors/{conn}/uploads")]
    assert gateway["body_reads"] == 0 and gateway["stored"] == []


def test_declared_size_over_the_cap_is_refused_before_anything_else(app: Client, tenant: Tenant, gateway: dict,
                                                                   monkeypatch: Any) -> None:
    _no_parser(monkeypatch)
    r = _upload(app, tenant.token, "big.pdf", b"%PDF-", _documents_connector(tenant),
                {"Content-Length": str(upstream.MAX_UPLOAD_BYTES + 1)})
    assert r.status_code == 413 and r.json_body["code"] == "too_large", r.body
    assert "limited to 5 MiB" in r.json_body["detail"]
    assert gateway["asked"] == [] and gateway["body_reads"] == 0


def test_admin_upload_is_stored_unparsed_and_read_by_the_sync(app: Client, tenant: Tenant, gateway: dict,
                                                              monkeypatch: Any) -> None:
    """A scan and a PDF built to be slow to read (1,000 pages sharing one stream, 1.1 KiB) are stored by the
    upload route without any parser running; the sync then names each with its reason and indexes the good
    file beside them."""
    conn = _documents_connector(tenant)
    files = {"scan.pdf": documents.scanned_pdf(), "pages.pdf": documents.shared_stream_pdf(),
             "good.md": b"# Parking\n\nStaff parking is free on Fridays."}
    with monkeypatch.context() as m:
        _no_parser(m)
        for name, data in files.items():
            r = _upload(app, tenant.token, name, data, conn)
            assert r.status_code == 201, r.body
            assert r.json_body["file_name"] == name and "upload_url" not in r.json_body
    assert len(gateway["stored"]) == len(files) and gateway["body_reads"] == len(files)
    monkeypatch.setenv("DOCUMENT_MAX_CONTENT_MB", "8")
    settings.cache_clear()  # settings are read once from the environment
    gw = Client(create_app("gateway"))
    auth = {"Authorization": f"Bearer {tenant.token}", "Content-Type": "application/json"}
    sync = gw.http.post(f"/v1/connectors/{conn}/sync", body="{}", headers=auth).json_body
    drain(tenant.region)
    run = gw.http.get(f"/v1/connectors/{conn}/syncs/{sync['id']}", headers=auth).json_body
    assert run["status"] == "SUCCEEDED" and run["attempts"] == 1 and run["rows_written"] == 1, run
    assert sorted(s.split(" ", 1)[0] for s in run["skipped"]) == ["pages.pdf", "scan.pdf"], run["skipped"]
    assert any("no text layer" in s for s in run["skipped"]) and any("page content" in s for s in run["skipped"])


@pytest.mark.parametrize(("name", "data", "code", "words"), [
    ("bomb.docx", documents.zip_bomb(250), "zip_bomb", "zip bomb"),
    ("expands.docx", documents.expanding_docx(8, ratio=150), "zip_bomb", "zip bomb"),
    ("empty.txt", b"", "empty_file", "0 bytes"),
    ("renamed.txt", documents.pdf(["x"]), "wrong_extension", "holds a PDF"),
    ("tool.exe", b"MZ", "unsupported_type", "not supported"),
    ("big.txt", b"a" * (upstream.MAX_UPLOAD_BYTES + 1), "too_large", "limited to 5 MiB"),
])
def test_unreadable_upload_refused_by_name_and_nothing_stored(app: Client, tenant: Tenant, gateway: dict,
                                                              monkeypatch: Any, name: str, data: bytes, code: str,
                                                              words: str) -> None:
    """What can be told without a parser is refused at once, by name, after the caller's right is checked."""
    conn = _documents_connector(tenant)
    _no_parser(monkeypatch)
    r = _upload(app, tenant.token, name, data, conn, {"Content-Length": "0"})  # the real size is checked too
    assert r.status_code in (413, 422), r.body
    assert r.json_body["code"] == code
    assert name in r.json_body["detail"] and words in r.json_body["detail"]
    assert gateway["asked"] == [("POST", f"/v1/connectors/{conn}/uploads")] and gateway["stored"] == []


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
    assert '<code class="language-python"><span class="nb">print</span><span class="p">(</span><span class="s1">\'&lt;b&gt;\'</span>' in html
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
