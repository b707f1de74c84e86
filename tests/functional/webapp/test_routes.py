"""The app group's own routes (Chalice test client, moto): pages and 404s, static files, the sign-in
round trip's error pages, and the session and forwarder calls' CSRF and path rules, each attacked."""
from __future__ import annotations

import json
import re
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from chalice.test import Client

from chalicelib.core.config import settings
from chalicelib.groups import create_app
from chalicelib.identity.signin import flows
from chalicelib.webapp import pages, session, shell, upstream
from tests.functional.conftest import Tenant

SAME = {"X-Requested-With": "app", "Content-Type": "application/json"}


@pytest.fixture
def app(stack: None) -> Client:
    return Client(create_app("app"))


def _cookie(token: str) -> dict[str, str]:
    return {"Cookie": f"{session.ACCESS}={token}"}


def test_unknown_addresses_get_the_404_page_at_every_depth(app: Client) -> None:
    for path in ("/nope", "/knowledge/nope", "/a/b/c/d/e", "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p"):
        r = app.http.get(path)
        assert r.status_code == 404, path
        assert r.headers["Content-Type"].startswith("text/html")
        assert "Page not found" in r.body.decode()
        assert "script-src 'self'" in r.headers["Content-Security-Policy"]
        assert "unsafe-inline" not in r.headers["Content-Security-Policy"]


def test_signed_out_deep_link_starts_sign_in_and_keeps_the_address(app: Client) -> None:
    r = app.http.get("/knowledge/datasets/ds_123?tab=schema")
    assert r.status_code == 302
    location = urlsplit(r.headers["Location"])
    assert f"{location.scheme}://{location.netloc}" == settings().auth_url
    q = parse_qs(location.query)
    assert q["code_challenge_method"] == ["S256"]
    assert "prompt" not in q
    flow = flows.take("app", q["state"][0])
    assert flow
    assert flow["path"] == "/knowledge/datasets/ds_123?tab=schema"


def test_signed_in_page_is_the_shell(app: Client, tenant: Tenant) -> None:
    r = app.http.get("/members", headers=_cookie(tenant.token))
    assert r.status_code == 200
    html = r.body.decode()
    assert '<script type="module" src="/static/start/members.js"></script>' in html
    assert "<style" not in html
    assert " style=" not in html
    assert "onclick" not in html


def test_the_shell_carries_the_sessions_claims_and_preloads_the_pages_modules(app: Client, tenant: Tenant) -> None:
    html = app.http.get("/settings", headers=_cookie(tenant.token)).body.decode()
    found = re.search(r' data-claims="([^"]*)"', html)
    assert found, html
    claims = json.loads(unescape(found.group(1)))
    assert claims == app.http.get("/session/claims", headers={**_cookie(tenant.token), **SAME}).json_body
    assert claims["workspace_id"] == tenant.workspace_id and claims["email"] == tenant.email
    assert tenant.token not in html and tenant.token.split(".")[2] not in html  # never the token itself
    preloaded = re.findall(r'<link rel="modulepreload" href="/static/([a-z_/]+\.js)">', html)
    # the page's module and the modules it imports (settings.js imports pages/models.js), not other pages'
    assert {"main.js", "api.js", "shell.js", "pages/settings.js", "pages/models.js", "replication.js"} <= set(preloaded)
    assert "pages/chat.js" not in preloaded
    assert "data-claims" not in app.http.get("/settings").body.decode()  # signed out: the sign-in redirect


def test_claims_cannot_break_out_of_the_shells_attribute() -> None:
    hostile = {"sub": "usr_1", "email": '"><script>alert(1)</script><x a=\'', "workspace_id": "ws_1",
               "roles": ["member"], "amr": ["pwd"], "exp": 1}
    html = pages.shell_html(200, "home", hostile)
    assert "<script>alert" not in html and html.count("<script") == 1  # the start module only
    found = re.search(r' data-claims="([^"]*)"', html)
    assert found and json.loads(unescape(found.group(1))) == hostile  # the value survives, as data


def test_every_route_of_the_router_is_served(app: Client, tenant: Tenant) -> None:
    for regex, name in pages.route_patterns():
        sample = regex.pattern.strip("^$").replace("[^/]+", "x1").replace("\\", "")
        assert pages.page_name(sample) == name or name == "agent_edit"
        r = app.http.get(sample, headers=_cookie(tenant.token))
        assert r.status_code == 200, sample


def test_each_page_starts_from_a_module_that_holds_main_and_the_pages_module(app: Client) -> None:
    """The shell's script imports main.js and the page's module statically and starts the app with it."""
    for name, module in pages.page_modules().items():
        r = app.http.get(f"/static/start/{name}.js")
        assert r.status_code == 200, name
        assert r.headers["Content-Type"].startswith("text/javascript")
        body = r.body.decode()
        assert 'import { start } from "../main.js";' in body
        assert f'import * as page from "../{module}";' in body and f'start("{name}", page);' in body
        assert app.http.get(f"/static/start/{name}.js", headers={"If-None-Match": r.headers["ETag"]}).status_code == 304
    for bad in ("/static/start/signed_out.js", "/static/start/nothing.js", "/static/start/home.css",
                "/static/start/..%2Fmain.js", "/static/start/HOME.JS", "/static/start/home"):
        assert app.http.get(bad).status_code == 404, bad


def test_static_files_and_traversal(app: Client) -> None:
    r = app.http.get("/static/main.js")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/javascript")
    etag = r.headers["ETag"]
    assert app.http.get("/static/main.js", headers={"If-None-Match": etag}).status_code == 304
    assert app.http.get("/static/pages/query.js").status_code == 200
    for bad in ("/static/routes.py", "/static/..%2Fpages.py", "/static/pages/..%2F..%2Fshell.py", "/static/.env",
                "/static/pages/home.js.map", "/static/MAIN.JS"):
        assert app.http.get(bad).status_code == 404, bad


def test_mfa_required_refusal_explains_the_way_forward(app: Client) -> None:
    r = app.http.get("/callback?error=access_denied&error_description=This+workspace+requires+multi-factor+"
                     "authentication%3A+sign+in+with+a+second+factor&state=x")
    body = r.body.decode()
    assert r.status_code == 400
    assert "requires multi-factor authentication" in body
    assert settings().auth_url + "/account" in body
    assert "/session/signin?path=%2F&amp;fresh=1" in body
    again = app.http.get("/session/signin?path=%2Faudit&fresh=1")
    assert parse_qs(urlsplit(again.headers["Location"]).query)["prompt"] == ["login"]


@pytest.mark.parametrize("error,description,mfa", [
    ("access_denied", "MFA is required in this workspace", True),
    ("access_denied", "This workspace requires multi-factor authentication", True),
    ("mfa_required", "", True),
    ("interaction_required", "Add a second factor to continue", True),
    ("access_denied", "The user cancelled the sign-in", False),
    ("server_error", "mfa service down", False),
])
def test_mfa_refusals_are_recognised_whatever_the_wording(app: Client, error: str, description: str, mfa: bool) -> None:
    from urllib.parse import urlencode

    r = app.http.get("/callback?" + urlencode({"error": error, "error_description": description, "state": "x"}))
    body = r.body.decode()
    assert r.status_code == 400
    assert ("Multi-factor authentication required" in body) is mfa
    assert (settings().auth_url + "/account" in body) is mfa
    assert 'id="signin-again"' in body


def test_error_text_is_escaped(app: Client) -> None:
    r = app.http.get("/callback?error=x&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    assert "<script>alert" not in r.body.decode()
    assert "&lt;script&gt;" in r.body.decode()


def test_open_redirect_after_sign_in_is_refused(app: Client) -> None:
    for evil in ("//evil.example/x", "https://evil.example", "/\\evil.example"):
        r = app.http.get("/session/signin?path=" + evil)
        state = parse_qs(urlsplit(r.headers["Location"]).query)["state"][0]
        assert flows.take("app", state)["path"] == "/", evil


EVIL_PATHS = [
    "/%09/evil.example", "/%0d%0a/evil.example", "/%0aSet-Cookie:%20a=b", "%2F%2Fevil.example", "/%20/evil.example",
    "/%5C/evil.example", "/%2509/evil.example", "/%252F%252Fevil.example", "/%2F/evil.example", "/audit/..//evil.example",
    "/./audit", "/audit/%2E%2E/x", "/nope", "/chat/%0d%0aX:%20y", "/audit?x=%250d%250a", "/%E2%80%AE/evil.example",
    "/%C0%AF/evil.example", "/audit%23frag", "https:evil.example", "/%00", "",
]


@pytest.mark.parametrize("evil", EVIL_PATHS)
def test_a_return_path_the_app_does_not_know_ends_at_home(app: Client, evil: str) -> None:
    """The sign-in link with the path answers the usual redirect to the identity service (never a 500),
    and the address the browser returns to after signing in (the ``Location`` of /callback is the stored
    flow's path) is ``/``; a refused round trip's "sign in again" link goes there too."""
    r = app.http.get("/session/signin?path=" + evil)
    assert r.status_code == 302, (evil, r.status_code)
    assert r.headers["Location"].startswith(settings().auth_url + "/oauth2/authorize?"), evil
    state = parse_qs(urlsplit(r.headers["Location"]).query)["state"][0]
    refused = app.http.get(f"/callback?error=access_denied&state={state}",
                           headers={"Cookie": f"{shell.STATE_COOKIE}={state}"})
    assert "/session/signin?path=%2F&amp;fresh=1" in refused.body.decode(), evil
    r = app.http.get("/session/signin?path=" + evil)
    state = parse_qs(urlsplit(r.headers["Location"]).query)["state"][0]
    assert flows.take("app", state)["path"] == "/", evil


@pytest.mark.parametrize("known,expected", [
    ("/audit", "/audit"), ("%2Faudit", "/audit"), ("/audit/", "/audit/"), ("/chat/chat_01ABC", "/chat/chat_01ABC"),
    ("/knowledge/datasets/ds_1%3Ftab%3Dschema", "/knowledge/datasets/ds_1?tab=schema"),
    ("/invitations/accept%3Ftoken%3Da%252Bb", "/invitations/accept?token=a%2Bb"),
    ("/%61udit", "/audit"),
])
def test_a_known_page_is_returned_to_in_one_canonical_spelling(app: Client, known: str, expected: str) -> None:
    r = app.http.get("/session/signin?path=" + known)
    state = parse_qs(urlsplit(r.headers["Location"]).query)["state"][0]
    assert flows.take("app", state)["path"] == expected


def test_session_calls_refuse_cross_site_requests(app: Client, tenant: Tenant) -> None:
    cookie = _cookie(tenant.token)
    attacks = [{"Content-Type": "application/json"},  # a page elsewhere cannot add X-Requested-With
               {**SAME, "Origin": "https://evil.example"}]
    for path in ("/session/workspace", "/session/signout", "/session/refresh", "/api/platform/v1/workspaces"):
        for headers in attacks:
            r = app.http.post(path, headers={**cookie, **headers}, body='{"workspace_id": "ws_x"}')
            assert r.status_code == 403, (path, headers)
            assert r.json_body["code"] == "csrf_refused", (path, headers)
    r = app.http.get("/session/claims", headers=cookie)
    assert r.status_code == 403


def test_claims_and_forwarder_need_a_live_session(app: Client, tenant: Tenant) -> None:
    got = app.http.get("/session/claims", headers={**_cookie(tenant.token), **SAME}).json_body
    assert got["workspace_id"] == tenant.workspace_id
    assert "access_token" not in str(got)
    for headers in ({}, _cookie("not-a-token"), _cookie(tenant.token + "x")):
        r = app.http.get("/api/platform/v1/me", headers={**headers, **SAME})
        assert r.status_code == 401
        assert r.json_body["code"] == "session_expired"


def test_switch_to_a_workspace_of_someone_else_is_refused(app: Client, tenant: Tenant, monkeypatch: Any) -> None:
    def refused(form: dict[str, str]) -> dict[str, Any]:
        assert form["subject_token"] == tenant.token
        assert form["workspace_id"] == "ws_01OTHER"
        raise session.SessionError("access_denied", "You are not a member of that workspace.")

    monkeypatch.setattr(session, "_token_call", refused)  # the identity service's answer, tested in its own suite
    r = app.http.post("/session/workspace", headers={**_cookie(tenant.token), **SAME}, body='{"workspace_id": "ws_01OTHER"}')
    assert r.status_code == 403
    assert r.json_body["code"] == "access_denied"
    assert "Set-Cookie" not in r.headers
    for body in ('{"workspace_id": "../x"}', '{"workspace_id": 5}', '{"workspace_id": "ws_1", "x": 1}', "[]"):
        r = app.http.post("/session/workspace", headers={**_cookie(tenant.token), **SAME}, body=body)
        assert r.status_code == 400, body


@pytest.mark.parametrize("surface,segments", [
    ("platform", ["..", "admin"]), ("platform", ["v1", "..", "..", "etc"]), ("platform", ["graphql"]),
    ("gateway", ["v2", "x"]), ("identity", ["v1", "me"]), ("platform", ["v1", "a b"]), ("platform", ["v1", ""]),
    ("gateway", ["v1", "x%2F..%2F"]), ("platform", ["v1", "http:", "", "evil.example"]),
])
def test_forwarder_reaches_only_api_paths(surface: str, segments: list[str]) -> None:
    assert upstream.url_for(surface, segments, None) is None


def test_forwarder_builds_fixed_base_urls(stack: None) -> None:
    assert upstream.url_for("gateway", ["graphql"], None) == settings().gateway_url + "/graphql"
    assert upstream.url_for("platform", ["v1", "audit", "events"], {"action": "member.*"}) == \
        settings().base_url + "/v1/audit/events?action=member.%2A"


def test_cookies_are_http_only_and_scoped() -> None:
    issued = session.Issued("at", 900, "rt_x", "idt", "ws_1").cookies()
    assert all("HttpOnly" in c for c in issued)
    assert issued[0].startswith("app_at=at; Path=/;")
    assert "SameSite=Lax" in issued[0]
    assert all("Path=/session" in c and "SameSite=Strict" in c for c in issued[1:])


def test_wrong_region_is_retried_only_at_a_configured_deployment(stack: None, monkeypatch: Any) -> None:
    from chalicelib.core import regions

    monkeypatch.setattr(regions, "public_endpoints", lambda: {
        "us-east": {"api_base_url": settings().base_url + "/v1", "gateway_url": settings().gateway_url},
        "eu-central": {"api_base_url": "http://127.0.0.1:9100/v1", "gateway_url": "http://127.0.0.1:9101"}})
    url = settings().base_url + "/v1/me"

    def answer(body: str) -> upstream.Answer:
        return upstream.Answer(421, body.encode(), {})

    eu = '{"code": "wrong_region", "api_base_url": "http://127.0.0.1:9100/v1", "gateway_url": "http://127.0.0.1:9101"}'
    assert upstream.regional_retry("platform", answer(eu), url) == "http://127.0.0.1:9100/v1/me"
    assert upstream.regional_retry("gateway", answer(eu), settings().gateway_url + "/v1/query") == \
        "http://127.0.0.1:9101/v1/query"
    evil = '{"code": "wrong_region", "api_base_url": "https://evil.example/v1"}'
    assert upstream.regional_retry("platform", answer(evil), url) is None
    assert upstream.regional_retry("platform", upstream.Answer(404, eu.encode(), {}), url) is None


def test_addresses_deeper_than_the_page_routes_get_the_404_page_from_the_local_server(stack: None) -> None:
    """No app route serves more than MAX_DEPTH segments; the local server (as `make run` starts it)
    answers them with the app's 404 page, never a raw 403 echoing the Authorization header."""
    import http.client

    from tests.local_http import serve_group

    server = serve_group("app")
    try:
        for depth in (pages.MAX_DEPTH + 1, 40):
            conn = http.client.HTTPConnection("127.0.0.1", server.server.server_address[1], timeout=30)
            conn.request("GET", "/x" * depth, headers={"Authorization": "Bearer secret-token-value"})
            r = conn.getresponse()
            body = r.read().decode()
            conn.close()
            assert r.status == 404, depth
            assert r.getheader("Content-Type").startswith("text/html")
            assert "Page not found" in body
            csp = r.getheader("Content-Security-Policy")  # the deployed gateway response's policy, no quotes
            assert csp.startswith("sandbox; default-src ")
            assert "'" not in csp
            assert "unsafe" not in csp
            assert "#" not in body  # rendered verbatim by API Gateway's Velocity engine when deployed
            assert "secret-token-value" not in body
            assert "Missing Authentication" not in body
    finally:
        server.server.shutdown()
        server.server.server_close()
