"""Standards conformance of the provider: RFC 6749 section 5.2 errors, RFC 6750 realms, RFC 7662,
OIDC Core authorization requests (PKCE by client type, POST, unknown scopes, request objects,
client_secret_post) and RFC 9068 ``client_id`` on every access token."""
from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlencode

import pytest
from chalice.test import Client
from jose import jwt

from chalicelib.groups import create_app
from chalicelib.identity.account import api_tokens
from chalicelib.identity.oauth.clients import register_client
from chalicelib.identity.oauth.grants.token_exchange import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE
from chalicelib.identity.oauth.signing import PLATFORM_CLIENT_ID
from tests.functional.conftest import make_tenant
from tests.functional.identity.helpers import body
from tests.functional.identity.oauth.test_routes import (
    REDIRECT,
    authorize,
    location_params,
    pkce,
    signed_in_cookie,
    token_call,
)

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def basic(client_id: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


def assert_oauth_error(r: Any, status: int, error: str) -> dict[str, Any]:
    """RFC 6749 section 5.2: JSON (not problem+json), an RFC code, never cached."""
    assert r.status_code == status, r.body
    assert r.headers["Content-Type"] == "application/json"
    assert r.headers["Cache-Control"] == "no-store"
    assert r.headers["Pragma"] == "no-cache"
    got = body(r)
    assert got["error"] == error
    assert got["error_description"]
    return got


@pytest.fixture
def confidential(stack: None) -> tuple[str, str]:
    client_id, secret = register_client("rp", confidential=True, redirect_uris=[REDIRECT], first_party=True)
    assert secret is not None
    return client_id, secret


@pytest.fixture
def public(stack: None) -> str:
    return register_client("spa", confidential=False, redirect_uris=[REDIRECT], first_party=True)[0]


def code_for(c: Any, cookie: str, client_id: str, **extra: str) -> dict[str, str]:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "scope": "openid",
              "state": "st", **extra}
    return location_params(authorize(c, cookie, **params))


# --- RFC 6749 section 5.2 -------------------------------------------------------------------------------

def test_token_errors_are_rfc_json_with_rfc_codes(public: str) -> None:
    make_tenant()
    with Client(create_app("identity")) as c:
        assert_oauth_error(token_call(c, {"client_id": public}), 400, "invalid_request")  # no grant_type
        assert_oauth_error(token_call(c, {"grant_type": "password", "client_id": public}), 400,
                           "unsupported_grant_type")
        r = c.http.post("/oauth2/token", headers=FORM,
                        body="grant_type=authorization_code&code=a&code=b&client_id=" + public)
        assert_oauth_error(r, 400, "invalid_request")  # a repeated parameter
        r = c.http.post("/oauth2/token", headers=FORM, body="x" * (300 * 1024))
        got = assert_oauth_error(r, 413, "invalid_request")
        assert got["reason"] == "body_too_large"
        assert_oauth_error(token_call(c, {"grant_type": "authorization_code", "code": "x", "client_id": "cli_no"}),
                           401, "invalid_client")


def test_revocation_and_introspection_errors_are_rfc_json(confidential: tuple[str, str]) -> None:
    cid, secret = confidential
    with Client(create_app("identity")) as c:
        r = c.http.post("/oauth2/revoke", headers={**FORM, **basic(cid, secret)}, body="")
        assert_oauth_error(r, 400, "invalid_request")
        # RFC 7662 section 2.1: token is required
        r = c.http.post("/oauth2/introspect", headers={**FORM, **basic(cid, secret)}, body="token_type_hint=x")
        assert_oauth_error(r, 400, "invalid_request")
        r = c.http.post("/oauth2/introspect", headers=FORM, body="token=abc")
        assert_oauth_error(r, 401, "invalid_client")
        assert r.headers["WWW-Authenticate"].startswith("Basic realm=")
        r = c.http.post("/oauth2/introspect", headers={**FORM, **basic(cid, "wrong")}, body="token=abc")
        assert_oauth_error(r, 401, "invalid_client")


def test_token_response_is_never_cached(confidential: tuple[str, str]) -> None:
    make_tenant()
    cid, secret = confidential
    with Client(create_app("identity")) as c:
        got = code_for(c, signed_in_cookie(c), cid)
        r = token_call(c, {"grant_type": "authorization_code", "code": got["code"], "redirect_uri": REDIRECT},
                       basic=(cid, secret))
        assert r.status_code == 200, r.body
        assert r.headers["Cache-Control"] == "no-store"
        assert r.headers["Pragma"] == "no-cache"
        assert r.headers["Content-Type"] == "application/json"


def test_exchange_into_foreign_workspace_and_mfa_are_rfc_errors(stack: None) -> None:
    a = make_tenant(email="alex@example.com", name="Alpha")
    other = make_tenant(email="mallory@example.com", name="Other")
    strict = make_tenant(email="alex@example.com", name="Strict", enforce_mfa=True)
    from chalicelib.identity.oauth.signing import issue_access_token
    no_mfa, _ = issue_access_token(user_id=a.user_id, email=a.email, workspace_id=a.workspace_id,
                                   roles=["admin"], amr=["pwd"])
    with Client(create_app("identity")) as c:
        def exchange(token: str, ws: str) -> Any:
            return c.http.post("/oauth2/token", headers=FORM, body=urlencode({
                "grant_type": TOKEN_EXCHANGE, "subject_token": token, "subject_token_type": ACCESS_TOKEN_TYPE,
                "workspace_id": ws}))
        assert_oauth_error(exchange(a.token, other.workspace_id), 400, "invalid_target")
        got = assert_oauth_error(exchange(no_mfa, strict.workspace_id), 400, "invalid_grant")
        assert got["reason"] == "mfa_required"


# --- RFC 6750 section 3.1: a realm and no error code when no credentials are sent ------------------------

@pytest.mark.parametrize("group,method,path", [
    ("identity", "GET", "/userinfo"),
    ("platform", "GET", "/v1/me"),
    ("gateway", "POST", "/graphql"),
    ("platform", "GET", "/v1/chats"),
    ("platform", "GET", "/v1/agents"),
])
def test_no_credentials_get_a_realm_without_error_code(stack: None, group: str, method: str, path: str) -> None:
    with Client(create_app(group)) as c:
        r = c.http.request(method, path, headers={"Content-Type": "application/json"}, body=b"{}")
        assert r.status_code == 401, (group, path, r.body)
        challenge = r.headers["WWW-Authenticate"]
        assert challenge.startswith("Bearer realm=")
        assert "error" not in challenge
        r = c.http.request(method, path, headers={"Content-Type": "application/json", "Authorization": "Bearer x.y.z"},
                           body=b"{}")
        assert r.status_code == 401
        assert 'error="invalid_token"' in r.headers["WWW-Authenticate"]


# --- OIDC Core authorization requests ---------------------------------------------------------------------

def test_confidential_client_without_pkce_and_client_secret_post(confidential: tuple[str, str]) -> None:
    tenant = make_tenant()
    cid, secret = confidential
    with Client(create_app("identity")) as c:
        cookie = signed_in_cookie(c)
        got = code_for(c, cookie, cid, nonce="n-1")
        r = token_call(c, {"grant_type": "authorization_code", "code": got["code"], "redirect_uri": REDIRECT,
                           "client_id": cid, "client_secret": secret})
        assert r.status_code == 200, r.body
        assert jwt.get_unverified_claims(body(r)["id_token"])["sub"] == tenant.user_id
        # a verifier for a request that had no challenge is refused
        got = code_for(c, cookie, cid)
        r = token_call(c, {"grant_type": "authorization_code", "code": got["code"], "redirect_uri": REDIRECT,
                           "code_verifier": pkce()[0]}, basic=(cid, secret))
        assert_oauth_error(r, 400, "invalid_grant")
        # a wrong client_secret_post secret, and both methods at once
        got = code_for(c, cookie, cid)
        form = {"grant_type": "authorization_code", "code": got["code"], "redirect_uri": REDIRECT, "client_id": cid}
        assert_oauth_error(token_call(c, {**form, "client_secret": "nope"}), 401, "invalid_client")
        assert_oauth_error(token_call(c, {**form, "client_secret": secret}, basic=(cid, secret)), 400,
                           "invalid_request")


def test_pkce_stays_required_for_public_and_pkce_registered_clients(public: str) -> None:
    strict, _ = register_client("strict rp", confidential=True, redirect_uris=[REDIRECT], require_pkce=True, first_party=True)
    make_tenant()
    with Client(create_app("identity")) as c:
        cookie = signed_in_cookie(c)
        for client_id in (public, strict):
            got = code_for(c, cookie, client_id)
            assert got["error"] == "invalid_request"
            assert "PKCE" in got["error_description"]
            assert got["state"] == "st"


def test_post_authorize_unknown_scopes_and_unknown_parameters(confidential: tuple[str, str]) -> None:
    make_tenant()
    cid, secret = confidential
    verifier, challenge = pkce()
    with Client(create_app("identity")) as c:
        cookie = signed_in_cookie(c)
        form = {"response_type": "code", "client_id": cid, "redirect_uri": REDIRECT, "state": "p",
                "scope": "openid address phone email weird:scope", "code_challenge": challenge,
                "code_challenge_method": "S256", "ui_locales": "fr", "display": "page", "acr_values": "1"}
        r = c.http.post("/oauth2/authorize", headers={**FORM, "Cookie": cookie}, body=urlencode(form))
        got = location_params(r)
        assert got["state"] == "p", got
        assert "code" in got, got
        r = token_call(c, {"grant_type": "authorization_code", "code": got["code"], "redirect_uri": REDIRECT,
                           "code_verifier": verifier}, basic=(cid, secret))
        assert r.status_code == 200, r.body
        assert body(r)["scope"] == "openid email"  # the unknown ones were ignored
        # POST with a repeated field is refused like GET
        r = c.http.post("/oauth2/authorize", headers={**FORM, "Cookie": cookie},
                        body=urlencode(form) + "&redirect_uri=https%3A%2F%2Fevil.example%2F")
        assert r.status_code == 400


@pytest.mark.parametrize("param,error", [("request", "request_not_supported"),
                                         ("request_uri", "request_uri_not_supported")])
def test_request_objects_are_answered_as_not_supported(confidential: tuple[str, str], param: str,
                                                       error: str) -> None:
    make_tenant()
    with Client(create_app("identity")) as c:
        got = code_for(c, signed_in_cookie(c), confidential[0], **{param: "eyJhbGciOiJub25lIn0.e30."})
        assert got["error"] == error
        assert got["state"] == "st"
        doc = body(c.http.get("/.well-known/openid-configuration"))
        assert doc["request_parameter_supported"] is False
        assert doc["request_uri_parameter_supported"] is False
        assert "client_secret_post" in doc["token_endpoint_auth_methods_supported"]
        assert "client_secret_post" in doc["introspection_endpoint_auth_methods_supported"]


def test_introspection_accepts_client_secret_post(confidential: tuple[str, str]) -> None:
    make_tenant()
    cid, secret = confidential
    with Client(create_app("identity")) as c:
        got = code_for(c, signed_in_cookie(c), cid)
        access = body(token_call(c, {"grant_type": "authorization_code", "code": got["code"],
                                     "redirect_uri": REDIRECT}, basic=(cid, secret)))["access_token"]
        r = c.http.post("/oauth2/introspect", headers=FORM,
                        body=urlencode({"token": access, "client_id": cid, "client_secret": secret}))
        assert r.status_code == 200
        assert body(r)["active"] is True
        assert body(r)["client_id"] == cid


# --- RFC 9068 ---------------------------------------------------------------------------------------------

def test_every_access_token_is_at_jwt_with_client_id(confidential: tuple[str, str]) -> None:
    tenant = make_tenant()
    second = make_tenant(name="Second")
    cid, secret = confidential
    api_token, _ = api_tokens.create(tenant.user_id, ["pwd", "otp", "mfa"], name="ci",
                                     workspace_id=tenant.workspace_id, expires_in_days=1)
    with Client(create_app("identity")) as c:
        got = code_for(c, signed_in_cookie(c), cid)
        access = body(token_call(c, {"grant_type": "authorization_code", "code": got["code"],
                                     "redirect_uri": REDIRECT}, basic=(cid, secret)))["access_token"]
        r = c.http.post("/oauth2/token", headers={**FORM, **basic(cid, secret)}, body=urlencode({
            "grant_type": TOKEN_EXCHANGE, "subject_token": access, "subject_token_type": ACCESS_TOKEN_TYPE,
            "workspace_id": second.workspace_id}))
        assert r.status_code == 200, r.body
        exchanged = body(r)["access_token"]
    for token, client_id in ((access, cid), (exchanged, cid), (api_token, PLATFORM_CLIENT_ID),
                             (tenant.token, PLATFORM_CLIENT_ID)):
        assert jwt.get_unverified_header(token)["typ"] == "at+jwt"
        assert jwt.get_unverified_claims(token)["client_id"] == client_id
    assert json.loads(json.dumps(jwt.get_unverified_claims(exchanged)))["workspace_id"] == second.workspace_id
