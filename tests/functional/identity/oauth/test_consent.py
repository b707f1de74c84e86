"""Consent for third-party OAuth clients: a self-registered client gets no code until the signed-in user
allowed it that workspace, scope set and resource; the answer is CSRF-guarded and bound to the session;
consents are remembered, listed and revocable (revoking ends the app's refresh and access tokens); the web
app never asks. Also: a refresh the grant cannot serve does not consume the refresh token."""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from chalice.test import Client

from chalicelib.core import audit
from chalicelib.core.config import settings
from chalicelib.core.tokens import mcp_resources
from chalicelib.groups import create_app
from chalicelib.identity.oauth.clients import register_client
from chalicelib.webapp.shell import ensure_app_client
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.identity.helpers import body, post
from tests.functional.identity.oauth.test_routes import (
    REDIRECT,
    authorize,
    location_params,
    pkce,
    signed_in_cookie,
    token_call,
)

ATTACKER = "https://attacker.example/cb"
CONSENT_PAGE = "/oauth2/consent?"


@pytest.fixture
def c(stack: None) -> Any:
    with Client(create_app("identity")) as client:
        yield client


def register(c: Any, name: str = "Totally Legit Assistant") -> str:
    r = c.http.post("/oauth2/register", headers={"Content-Type": "application/json"}, body=json.dumps({
        "redirect_uris": [ATTACKER], "token_endpoint_auth_method": "none", "client_name": name,
        "grant_types": ["authorization_code", "refresh_token"]}))
    assert r.status_code == 201, r.body
    return str(body(r)["client_id"])


def ask(c: Any, cookie: str, client_id: str, challenge: str, **extra: str) -> Any:
    return authorize(c, cookie, response_type="code", client_id=client_id, redirect_uri=ATTACKER, state="st",
                     code_challenge=challenge, code_challenge_method="S256", **{"scope": "openid", **extra})


def consent_key(r: Any) -> str:
    """The pending request a 302 to the consent page names (and no code went anywhere)."""
    assert r.status_code == 302, r.body
    location = r.headers["Location"]
    assert location.startswith(settings().auth_url + CONSENT_PAGE), location
    assert "code=" not in location
    return parse_qs(urlsplit(location).query)["request"][0]


def answer(c: Any, cookie: str, key: str, decision: str, headers: dict[str, str] | None = None) -> Any:
    return post(c, "/oauth2/consent", {"request": key, "decision": decision}, {"Cookie": cookie, **(headers or {})})


def allow(c: Any, cookie: str, key: str) -> dict[str, str]:
    r = answer(c, cookie, key, "allow")
    assert r.status_code == 200, r.body
    return {k: v[0] for k, v in parse_qs(urlsplit(body(r)["redirect_to"]).query).items()}


def code_for(c: Any, cookie: str, client_id: str, challenge: str, **extra: str) -> str:
    r = ask(c, cookie, client_id, challenge, **extra)
    if r.headers["Location"].startswith(settings().auth_url + CONSENT_PAGE):
        params = allow(c, cookie, consent_key(r))
    else:
        params = location_params(r)
    assert "code" in params, params
    return params["code"]


def redeem(c: Any, client_id: str, code: str, verifier: str, **extra: str) -> Any:
    return token_call(c, {"grant_type": "authorization_code", "code": code, "redirect_uri": ATTACKER,
                          "client_id": client_id, "code_verifier": verifier, **extra})


def refresh(c: Any, client_id: str, rt: str, **extra: str) -> Any:
    return token_call(c, {"grant_type": "refresh_token", "refresh_token": rt, "client_id": client_id, **extra})


def events(tenant: Tenant, action: str) -> list[dict[str, Any]]:
    return [e for e in audit.iter_chain(tenant.region, tenant.workspace_id) if e["action"] == action]


def test_a_self_registered_client_gets_no_code_without_consent(c: Any) -> None:
    tenant = make_tenant()
    other = make_tenant(name="Other")
    client_id = register(c)
    verifier, challenge = pkce()
    cookie = signed_in_cookie(c)
    key = consent_key(ask(c, cookie, client_id, challenge))
    # nor with prompt=none, another workspace, or the MCP resource: each answers consent_required / the page
    p = location_params(ask(c, cookie, client_id, challenge, prompt="none"))
    assert p["error"] == "consent_required" and p["state"] == "st" and "code" not in p
    consent_key(ask(c, cookie, client_id, challenge, workspace_id=other.workspace_id))
    consent_key(ask(c, cookie, client_id, challenge, resource=sorted(mcp_resources())[0]))
    # the page: the name marked as self-declared, where the browser goes, registration, workspace, role
    page = c.http.get(CONSENT_PAGE.rstrip("?") + "?request=" + key, headers={"Cookie": cookie})
    assert page.status_code == 200
    html = page.body.decode() if isinstance(page.body, bytes) else page.body
    for text in ("Totally Legit Assistant", "name given by the application itself, not verified", "attacker.example",
                 "Registered itself on", "Acme", "admin", 'id="allow"', 'id="deny"'):
        assert text in html, text
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    assert page.headers["X-Frame-Options"] == "DENY"
    # Deny: access_denied at the redirect URI, no code, the request is used up
    r = answer(c, cookie, key, "deny")
    assert r.status_code == 200, r.body
    denied = parse_qs(urlsplit(body(r)["redirect_to"]).query)
    assert body(r)["redirect_to"].startswith(ATTACKER)
    assert denied["error"] == ["access_denied"] and denied["state"] == ["st"] and "code" not in denied
    assert answer(c, cookie, key, "allow").status_code == 400
    assert not events(tenant, "oauth.consent_granted")
    # Allow: a code; the token works
    code = allow(c, cookie, consent_key(ask(c, cookie, client_id, challenge)))["code"]
    r = redeem(c, client_id, code, verifier)
    assert r.status_code == 200, r.body
    granted = events(tenant, "oauth.consent_granted")
    assert len(granted) == 1 and granted[0]["target"]["id"] == client_id
    assert granted[0]["details"]["scopes"] == ["openid"]


def test_remembered_consent_skips_the_page_and_anything_new_asks_again(c: Any) -> None:
    make_tenant()
    other = make_tenant(name="Other")
    client_id = register(c)
    _, challenge = pkce()
    cookie = signed_in_cookie(c)
    allow(c, cookie, consent_key(ask(c, cookie, client_id, challenge, scope="openid email")))
    # the same request, and a narrower one, get a code straight away (prompt=none too)
    assert "code" in location_params(ask(c, cookie, client_id, challenge, scope="openid email"))
    assert "code" in location_params(ask(c, cookie, client_id, challenge, prompt="none"))
    assert "code" in location_params(ask(c, cookie, client_id, challenge, scope="openid mfa"))  # mfa grants nothing
    # prompt=consent always asks; a new scope, workspace or resource asks again
    consent_key(ask(c, cookie, client_id, challenge, prompt="consent"))
    consent_key(ask(c, cookie, client_id, challenge, scope="openid email profile"))
    consent_key(ask(c, cookie, client_id, challenge, workspace_id=other.workspace_id))
    consent_key(ask(c, cookie, client_id, challenge, resource=sorted(mcp_resources())[0]))
    p = location_params(ask(c, cookie, client_id, challenge, workspace_id=other.workspace_id, prompt="none"))
    assert p["error"] == "consent_required"


def test_the_answer_is_csrf_guarded_and_bound_to_the_session(c: Any) -> None:
    make_tenant()
    make_tenant("mallory@example.com", name="Mallory's")
    client_id = register(c)
    _, challenge = pkce()
    cookie = signed_in_cookie(c)
    key = consent_key(ask(c, cookie, client_id, challenge))
    form = c.http.post("/oauth2/consent", headers={"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"},
                       body=f"request={key}&decision=allow")
    assert form.status_code in (403, 415)
    r = answer(c, cookie, key, "allow", {"Origin": "https://attacker.example"})
    assert r.status_code == 403 and body(r)["code"] == "csrf_refused"
    r = c.http.post("/oauth2/consent", headers={"Cookie": cookie, "Content-Type": "application/json"},
                    body=json.dumps({"request": key, "decision": "allow"}))
    assert r.status_code == 403  # no Origin and no X-Requested-With: not our page
    assert answer(c, "", key, "allow").status_code == 401
    assert answer(c, cookie, key, "maybe").status_code == 400
    # another user's session neither sees nor answers the request
    mallory = signed_in_cookie(c, "mallory@example.com")
    assert c.http.get("/oauth2/consent?request=" + key, headers={"Cookie": mallory}).status_code == 400
    r = answer(c, mallory, key, "allow")
    assert r.status_code == 400 and body(r)["code"] == "consent_request_expired"
    # the request is still the owner's to answer
    assert "code" in allow(c, cookie, key)


def test_revoking_a_connected_app_ends_its_tokens_at_once(c: Any) -> None:
    tenant = make_tenant()
    client_id = register(c)
    verifier, challenge = pkce()
    cookie = signed_in_cookie(c)
    tokens = body(redeem(c, client_id, code_for(c, cookie, client_id, challenge), verifier))
    pending_code = code_for(c, cookie, client_id, challenge)  # issued, not yet redeemed
    r = c.http.get("/account/connected-apps", headers={"Cookie": cookie})
    assert r.status_code == 200, r.body
    [app] = body(r)["connected_apps"]
    assert app["client_id"] == client_id and app["self_declared"] is True
    assert app["redirect_hosts"] == ["attacker.example"] and app["last_used_at"]
    assert app["workspaces"][0]["role"] == "admin" and app["workspaces"][0]["scopes"] == ["openid"]
    assert app["workspaces"][0]["resources"] == ["service-api"]
    # CSRF-guarded like every account change
    r = c.http.delete("/account/connected-apps/" + app["id"], headers={"Cookie": cookie})
    assert r.status_code == 403
    r = c.http.delete("/account/connected-apps/" + app["id"],
                      headers={"Cookie": cookie, "Content-Type": "application/json", "X-Requested-With": "t"})
    assert r.status_code == 200, r.body
    r = refresh(c, client_id, tokens["refresh_token"])
    assert r.status_code == 400 and body(r)["error"] == "invalid_grant"
    assert c.http.get("/userinfo", headers={"Authorization": f"Bearer {tokens['access_token']}"}).status_code == 401
    r = redeem(c, client_id, pending_code, verifier)
    assert r.status_code == 400 and body(r)["error"] == "invalid_grant"
    assert body(c.http.get("/account/connected-apps", headers={"Cookie": cookie}))["connected_apps"] == []
    withdrawn = events(tenant, "oauth.consent_withdrawn")
    assert len(withdrawn) == 1 and withdrawn[0]["details"]["grants_revoked"] == 1
    # the next request asks again
    consent_key(ask(c, cookie, client_id, challenge))
    r = c.http.delete("/account/connected-apps/app_unknown",
                      headers={"Cookie": cookie, "Content-Type": "application/json", "X-Requested-With": "t"})
    assert r.status_code == 404


def test_a_third_party_token_is_not_exchanged_for_another_workspace(c: Any) -> None:
    make_tenant()
    other = make_tenant(name="Other")
    client_id = register(c)
    verifier, challenge = pkce()
    cookie = signed_in_cookie(c)
    tokens = body(redeem(c, client_id, code_for(c, cookie, client_id, challenge), verifier))
    r = token_call(c, {"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange", "client_id": client_id,
                       "subject_token": tokens["access_token"], "workspace_id": other.workspace_id,
                       "subject_token_type": "urn:ietf:params:oauth:token-type:access_token"})
    assert r.status_code == 400 and body(r)["error"] == "unauthorized_client"


def test_first_party_clients_never_ask(c: Any) -> None:
    make_tenant()
    first, _ = register_client("web app", confidential=False, redirect_uris=[REDIRECT], first_party=True)
    admin_third, _ = register_client("Partner CRM", confidential=False, redirect_uris=[REDIRECT])
    _, challenge = pkce()
    cookie = signed_in_cookie(c)
    base = {"response_type": "code", "redirect_uri": REDIRECT, "code_challenge": challenge,
            "code_challenge_method": "S256", "state": "s"}
    assert "code" in location_params(authorize(c, cookie, client_id=first, prompt="consent", **base))
    app = ensure_app_client()  # the web app
    assert "code" in location_params(authorize(c, cookie, client_id=app, prompt="consent", **{
        **base, "redirect_uri": settings().app_url + "/callback"}))
    # an Admin-registered third party asks, and its name is not marked as self-declared
    r = authorize(c, cookie, client_id=admin_third, **base)
    assert r.headers["Location"].startswith(settings().auth_url + CONSENT_PAGE)
    page = c.http.get(urlsplit(r.headers["Location"]).path + "?" + urlsplit(r.headers["Location"]).query,
                      headers={"Cookie": cookie}).body
    text = page.decode() if isinstance(page, bytes) else page
    assert "Partner CRM" in text and "registered by an administrator" in text and "not verified" not in text


def test_the_sign_in_page_names_a_third_party_client_and_where_it_goes(c: Any) -> None:
    client_id = register(c, "Helpful <b>Bot</b>")
    _, challenge = pkce()
    r = ask(c, "", client_id, challenge)
    assert r.headers["Location"].startswith(settings().auth_url + "/signin?")
    page = c.http.get(urlsplit(r.headers["Location"]).path + "?" + urlsplit(r.headers["Location"]).query).body
    text = page.decode() if isinstance(page, bytes) else page
    assert "Helpful &lt;b&gt;Bot&lt;/b&gt;" in text and "<b>Bot</b>" not in text
    assert 'id="signin-next-host">attacker.example<' in text and "not verified" in text
    # a first-party client's sign-in page names no client
    first, _ = register_client("web app", confidential=False, redirect_uris=[REDIRECT], first_party=True)
    r = authorize(c, "", response_type="code", client_id=first, redirect_uri=REDIRECT, code_challenge=challenge,
                  code_challenge_method="S256")
    page = c.http.get(urlsplit(r.headers["Location"]).path + "?" + urlsplit(r.headers["Location"]).query).body
    assert "signin-client" not in (page.decode() if isinstance(page, bytes) else page)


def test_a_refresh_the_grant_cannot_serve_does_not_consume_the_token(c: Any) -> None:
    make_tenant()
    client_id = register(c)
    verifier, challenge = pkce()
    cookie = signed_in_cookie(c)
    tokens = body(redeem(c, client_id, code_for(c, cookie, client_id, challenge), verifier))
    r = refresh(c, client_id, tokens["refresh_token"], resource=sorted(mcp_resources())[0])
    assert r.status_code == 400 and body(r)["error"] == "invalid_target"
    r = refresh(c, client_id, tokens["refresh_token"], scope="openid email")
    assert r.status_code == 400 and body(r)["error"] == "invalid_scope"
    r = refresh(c, client_id, tokens["refresh_token"])  # not treated as reuse: the user stays signed in
    assert r.status_code == 200, r.body
    assert c.http.get("/account/sessions", headers={"Cookie": cookie}).status_code == 200
    # a reused token is still caught, whatever else the request says
    r = refresh(c, client_id, tokens["refresh_token"], resource=sorted(mcp_resources())[0])
    assert r.status_code == 400 and body(r)["error"] == "invalid_grant"
    assert c.http.get("/account/sessions", headers={"Cookie": cookie}).status_code == 401
