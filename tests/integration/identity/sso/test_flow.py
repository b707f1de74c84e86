"""Corporate SSO end to end against a real OpenID provider (npm ``oidc-provider`` on loopback), plus
workspace-suite (``hd``) and code-hosting (GitHub kind) sign-in, and domain verification.

Our side runs in-process (Chalice test clients over moto); the browser is a ``requests`` session that
follows the provider's redirects with its cookies, exactly like a browser without JavaScript would.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import pytest
import requests
from chalice.test import Client
from jose import jwt
from jose.utils import base64url_decode, base64url_encode

from chalicelib.core.config import settings
from chalicelib.core.tenancy import membership, workspaces
from chalicelib.groups import create_app
from chalicelib.identity.signin import flows, sessions
from chalicelib.identity.sso import flow as sso_flow
from chalicelib.identity.sso import http_client
from chalicelib.identity.users import find_by_email
from tests.functional.conftest import Tenant, _moto, bearer, make_tenant, stack  # noqa: F401 (fixtures)
from tests.integration.sso_peers import (
    CodeHostingProvider,
    OidcProvider,
    VerificationFiles,
    follow_until,
    node_available,
    start_oidc_provider,
)

AUTH = "http://localhost:8002"
CALLBACK = AUTH + "/sso/callback"
pytestmark = pytest.mark.integration
needs_node = pytest.mark.skipif(not node_available() and not os.environ.get("CI"), reason="run `make system-deps` (npm ci of the oidc-provider peer)")


@pytest.fixture
def files(monkeypatch: pytest.MonkeyPatch) -> Iterator[VerificationFiles]:
    server = VerificationFiles()
    monkeypatch.setenv("DOMAIN_VERIFICATION_URL", server.url_template)
    yield server
    server.stop()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, stack: None, files: VerificationFiles) -> Iterator[dict[str, Any]]:  # noqa: F811
    monkeypatch.setenv("AUTH_URL", AUTH)
    settings.cache_clear()
    sso_flow._discovery_cache.clear()
    tenant = make_tenant("admin@corp.example", name="Corp")
    with Client(create_app("identity")) as identity, Client(create_app("platform")) as platform:
        yield {"identity": identity, "platform": platform, "tenant": tenant, "files": files}
    sso_flow._discovery_cache.clear()
    settings.cache_clear()


@pytest.fixture
def idp() -> Iterator[Any]:
    started: list[OidcProvider] = []

    def start(port: int | None = None, secret: str | None = None, **account: Any) -> OidcProvider:
        claims = {"sub": "corp-user-1", "email": "alice@corp.example", "email_verified": True, "name": "Alice"}
        claims.update(account)
        provider = start_oidc_provider(CALLBACK, claims, port=port, secret=secret)
        started.append(provider)
        return provider

    yield start
    for provider in started:
        provider.stop()


def connect(env: dict[str, Any], provider_issuer: str, client_id: str, secret: str, *, domain: str = "corp.example",
            kind: str = "identity_platform", verify: bool = True, **extra: Any) -> dict[str, Any]:
    t: Tenant = env["tenant"]
    res = env["platform"].http.post(
        f"/v1/workspaces/{t.workspace_id}/sso/connections",
        body=json.dumps({"kind": kind, "domain": domain, "issuer": provider_issuer, "client_id": client_id,
                         "client_secret": secret, **extra}),
        headers={**bearer(t.token), "Content-Type": "application/json"})
    assert res.status_code == 201, res.body
    if verify:
        env["files"].files[domain] = res.json_body["verification"]["content"] + "\n"
        ok = env["platform"].http.post(f"/v1/workspaces/{t.workspace_id}/sso/connections/{domain}/verify",
                                       headers=bearer(t.token))
        assert ok.status_code == 200 and ok.json_body["verified"] is True, ok.body
    return res.json_body


def start_signin(env: dict[str, Any], email: str = "alice@corp.example", return_to: str = "/account") -> str:
    found = env["identity"].http.post("/signin/start", body=json.dumps({"email": email, "return_to": return_to}),
                                      headers={"Content-Type": "application/json"}).json_body
    assert found["next"] == "sso", found
    start = env["identity"].http.get(urlparse(found["provider"]["url"]).path + "?" + urlparse(found["provider"]["url"]).query)
    assert start.status_code == 302, start.body
    return start.headers["Location"]


def through_provider(authorize_url: str) -> dict[str, str]:
    """The browser part at the provider; returns the query our callback receives."""
    url = follow_until(requests.Session(), authorize_url, CALLBACK)
    return {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}


def callback(env: dict[str, Any], query: dict[str, str]) -> Any:
    return env["identity"].http.get("/sso/callback?" + urlencode(query))


@needs_node
def test_corporate_sso_end_to_end(env: dict[str, Any], idp: Any) -> None:
    provider = idp()
    conn = connect(env, provider.issuer, provider.client_id, provider.client_secret)
    assert "client_secret" not in conn and conn["client_secret_set"] is True
    authorize = start_signin(env)
    params = parse_qs(urlparse(authorize).query)
    assert params["code_challenge_method"] == ["S256"] and params["nonce"] and params["state"]
    assert params["login_hint"] == ["alice@corp.example"]
    res = callback(env, through_provider(authorize))
    assert res.status_code == 302, res.body
    assert res.headers["Location"] == AUTH + "/account"
    assert res.headers["Set-Cookie"].startswith(sessions.COOKIE_NAME + "=")
    user = find_by_email("alice@corp.example")
    assert user is not None and user.idp == provider.issuer and user.idp_subject == "corp-user-1"
    assert user.password_hash is None
    m = membership(env["tenant"].workspace_id, user.id)
    assert m is not None and m.role == "member" and m.joined_via == "sso"
    sid = res.headers["Set-Cookie"].split(";")[0].split("=", 1)[1]
    assert sorted(sessions.get_by_sid(sid).amr) == ["fed"]
    # a second sign-in finds the same account (no duplicate)
    res = callback(env, through_provider(start_signin(env)))
    assert res.status_code == 302 and find_by_email("alice@corp.example").id == user.id


@needs_node
def test_sso_user_found_by_subject_after_email_change(env: dict[str, Any], idp: Any) -> None:
    first = idp()
    connect(env, first.issuer, first.client_id, first.client_secret)
    assert callback(env, through_provider(start_signin(env))).status_code == 302
    user = find_by_email("alice@corp.example")
    first.stop()
    # the same provider (same issuer, client) now reports a new address for the same subject
    port = int(first.issuer.rsplit(":", 1)[1])
    idp(email="alice.smith@corp.example", port=port, secret=first.client_secret)
    res = callback(env, through_provider(start_signin(env, email="alice.smith@corp.example")))
    assert res.status_code == 302, res.body
    assert find_by_email("alice.smith@corp.example") is None  # found by subject: no second account
    sid = res.headers["Set-Cookie"].split(";")[0].split("=", 1)[1]
    assert sessions.get_by_sid(sid).user_id == user.id


@needs_node
def test_replayed_state_is_refused(env: dict[str, Any], idp: Any) -> None:
    provider = idp()
    connect(env, provider.issuer, provider.client_id, provider.client_secret)
    query = through_provider(start_signin(env))
    assert callback(env, query).status_code == 302
    again = callback(env, query)
    assert again.status_code == 400 and "already used" in again.body.decode()
    assert "Set-Cookie" not in again.headers


@needs_node
def test_wrong_nonce_is_refused(env: dict[str, Any], idp: Any) -> None:
    provider = idp()
    connect(env, provider.issuer, provider.client_id, provider.client_secret)
    authorize = start_signin(env)
    state = parse_qs(urlparse(authorize).query)["state"][0]
    # the stored sign-in now expects another nonce than the one sent to the provider
    data = flows.take("sso", state)
    flows.put("sso", {**data, "nonce": "another-sign-in-nonce"}, 600, key=state)
    res = callback(env, through_provider(authorize))
    assert res.status_code == 400 and "nonce" in res.body.decode()
    assert find_by_email("alice@corp.example") is None


def _tamper_token_response(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    real = http_client.post_form

    def post_form(url: str, form: dict[str, str], headers: dict[str, str] | None = None, **kw: Any) -> Any:
        answer = real(url, form, headers, **kw)
        if "id_token" in answer:
            answer["id_token"] = change(answer["id_token"])
        return answer

    monkeypatch.setattr(http_client, "post_form", post_form)


@needs_node
def test_tampered_id_token_is_refused(env: dict[str, Any], idp: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = idp()
    connect(env, provider.issuer, provider.client_id, provider.client_secret)

    def tamper(token: str) -> str:
        header, payload, sig = token.split(".")
        claims = json.loads(base64url_decode(payload.encode()))
        claims["email"] = "ceo@corp.example"
        forged = base64url_encode(json.dumps(claims).encode()).decode()
        return f"{header}.{forged}.{sig}"

    _tamper_token_response(monkeypatch, tamper)
    res = callback(env, through_provider(start_signin(env)))
    assert res.status_code == 400 and "failed validation" in res.body.decode()
    assert find_by_email("ceo@corp.example") is None and find_by_email("alice@corp.example") is None


@needs_node
def test_wrong_issuer_is_refused(env: dict[str, Any], idp: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = idp()
    connect(env, provider.issuer, provider.client_id, provider.client_secret)

    def reissue(token: str) -> str:  # same key, same nonce/audience, another issuer
        claims = jwt.get_unverified_claims(token)
        claims["iss"] = "https://evil.example"
        return jwt.encode(claims, provider.jwk, algorithm="RS256", headers={"kid": provider.jwk["kid"]})

    _tamper_token_response(monkeypatch, reissue)
    res = callback(env, through_provider(start_signin(env)))
    assert res.status_code == 400 and "another issuer" in res.body.decode()
    assert find_by_email("alice@corp.example") is None


@needs_node
def test_expired_id_token_is_refused(env: dict[str, Any], idp: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = idp()
    connect(env, provider.issuer, provider.client_id, provider.client_secret)

    def expire(token: str) -> str:
        claims = jwt.get_unverified_claims(token)
        claims["exp"] = int(time.time()) - 3600
        return jwt.encode(claims, provider.jwk, algorithm="RS256", headers={"kid": provider.jwk["kid"]})

    _tamper_token_response(monkeypatch, expire)
    assert callback(env, through_provider(start_signin(env))).status_code == 400


@needs_node
def test_email_outside_the_verified_domain_is_refused(env: dict[str, Any], idp: Any) -> None:
    provider = idp(email="mallory@other.example")
    connect(env, provider.issuer, provider.client_id, provider.client_secret)
    res = callback(env, through_provider(start_signin(env)))
    assert res.status_code == 400 and find_by_email("mallory@other.example") is None


def test_unverified_domain_does_not_route_to_sso(env: dict[str, Any]) -> None:
    conn = connect(env, "https://idp.corp.example", "cid", "secret", verify=False)
    assert conn["verified"] is False
    assert conn["verification"]["dns_txt_record"]["name"] == "_aiplat-verification.corp.example"
    t: Tenant = env["tenant"]
    # nothing published (or a wrong token): verification fails and is audited, nothing changes
    env["files"].files["corp.example"] = "aiplat-domain-verification=not-the-token\n"
    res = env["platform"].http.post(f"/v1/workspaces/{t.workspace_id}/sso/connections/corp.example/verify",
                                    headers=bearer(t.token))
    assert res.status_code == 422 and res.json_body["code"] == "domain_not_verified"
    found = env["identity"].http.post("/signin/start", body=json.dumps({"email": "alice@corp.example"}),
                                      headers={"Content-Type": "application/json"}).json_body
    assert found["next"] == "methods" and "password" in found["methods"]
    assert env["identity"].http.get("/sso/start?domain=corp.example").status_code == 404


def test_signin_start_same_shape_for_unknown_and_known(env: dict[str, Any]) -> None:
    def start(email: str) -> Any:
        return env["identity"].http.post("/signin/start", body=json.dumps({"email": email}),
                                         headers={"Content-Type": "application/json"})
    known, unknown = start("admin@corp.example"), start("nobody@corp.example")
    assert known.status_code == unknown.status_code == 200 and known.body == unknown.body
    bad = start("not-an-email")
    assert bad.status_code == 400 and bad.json_body["code"] == "validation_failed"


def test_sso_admin_api_needs_sso_manage_and_own_workspace(env: dict[str, Any]) -> None:
    other = make_tenant("owner@else.example", name="Else")
    t: Tenant = env["tenant"]
    body = json.dumps({"kind": "identity_platform", "domain": "corp.example", "issuer": "https://idp.corp.example",
                       "client_id": "c", "client_secret": "s"})
    res = env["platform"].http.post(f"/v1/workspaces/{t.workspace_id}/sso/connections", body=body,
                                    headers={**bearer(other.token), "Content-Type": "application/json"})
    assert res.status_code == 404
    from chalicelib.identity.oauth.signing import issue_access_token
    member_token, _ = issue_access_token(user_id="usr_x", email="m@corp.example", workspace_id=t.workspace_id,
                                         roles=["member"], amr=["pwd", "mfa"])
    res = env["platform"].http.post(f"/v1/workspaces/{t.workspace_id}/sso/connections", body=body,
                                    headers={**bearer(member_token), "Content-Type": "application/json"})
    assert res.status_code == 403
    bad = json.dumps({"kind": "nope", "issuer": "http://idp.example", "client_id": "c", "client_secret": "s"})
    res = env["platform"].http.post(f"/v1/workspaces/{t.workspace_id}/sso/connections", body=bad,
                                    headers={**bearer(t.token), "Content-Type": "application/json"})
    assert res.status_code == 400 and {e["field"] for e in res.json_body["errors"]} == {"kind"}


# --- workspace suite (Google Workspace kind): the hd claim ------------------------------------------

@needs_node
def test_workspace_suite_accepts_matching_hd(env: dict[str, Any], idp: Any) -> None:
    provider = idp(hd="corp.example")
    connect(env, provider.issuer, provider.client_id, provider.client_secret, kind="workspace_suite")
    authorize = start_signin(env)
    assert parse_qs(urlparse(authorize).query)["hd"] == ["corp.example"]
    assert callback(env, through_provider(authorize)).status_code == 302


@needs_node
@pytest.mark.parametrize("claims", [{"hd": "other.example"}, {}, {"hd": "corp.example", "email_verified": False}])
def test_workspace_suite_refuses_hd_mismatch_or_unverified(env: dict[str, Any], idp: Any, claims: dict[str, Any]) -> None:
    provider = idp(**claims)
    connect(env, provider.issuer, provider.client_id, provider.client_secret, kind="workspace_suite")
    res = callback(env, through_provider(start_signin(env)))
    assert res.status_code == 400, res.body
    assert find_by_email("alice@corp.example") is None


# --- code hosting (GitHub kind): engineering-only workspaces, verified e-mail ----------------------

@pytest.fixture
def github(env: dict[str, Any]) -> Iterator[Any]:
    servers: list[CodeHostingProvider] = []

    def start(emails: list[dict[str, Any]], engineering_only: bool = True) -> CodeHostingProvider:
        server = CodeHostingProvider(emails)
        servers.append(server)
        t: Tenant = env["tenant"]
        ws = workspaces().get(t.workspace_id)
        ws.update(actions=[type(ws).settings.set(json.dumps({"engineering_only": engineering_only}))])
        res = env["platform"].http.post(
            f"/v1/workspaces/{t.workspace_id}/sso/connections",
            body=json.dumps({"kind": "code_hosting", "issuer": server.url, "client_id": "gh-client",
                             "client_secret": "gh-secret", "endpoints": server.endpoints()}),
            headers={**bearer(t.token), "Content-Type": "application/json"})
        assert res.status_code == 201, res.body
        return server

    yield start
    for server in servers:
        server.stop()


def social(env: dict[str, Any]) -> Any:
    start = env["identity"].http.get("/sso/social/start?" + urlencode({"workspace_id": env["tenant"].workspace_id}))
    if start.status_code != 302:
        return start
    return callback(env, through_provider(start.headers["Location"]))


def test_code_hosting_signs_in_member_with_verified_email(env: dict[str, Any], github: Any) -> None:
    github([{"email": "admin@corp.example", "primary": True, "verified": True}])
    res = social(env)
    assert res.status_code == 302, res.body
    assert "Set-Cookie" in res.headers


def test_code_hosting_refuses_unverified_email(env: dict[str, Any], github: Any) -> None:
    github([{"email": "admin@corp.example", "primary": True, "verified": False},
            {"email": "someone@corp.example", "primary": False, "verified": True}])
    res = social(env)
    assert res.status_code == 400 and "not verified" in res.body.decode()
    assert "Set-Cookie" not in res.headers


def test_code_hosting_refused_for_non_engineering_workspace(env: dict[str, Any], github: Any) -> None:
    github([{"email": "admin@corp.example", "primary": True, "verified": True}], engineering_only=False)
    res = social(env)
    assert res.status_code == 403 and "engineering-only" in res.body.decode()


def test_code_hosting_refuses_non_member(env: dict[str, Any], github: Any) -> None:
    github([{"email": "stranger@corp.example", "primary": True, "verified": True}])
    res = social(env)
    assert res.status_code == 403 and find_by_email("stranger@corp.example") is None
