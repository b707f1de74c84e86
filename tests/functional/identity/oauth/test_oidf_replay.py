"""A replay of the OpenID Foundation conformance suite's Basic OP plan (confidential client,
``client_secret_basic``, no PKCE) and Config OP plan, module by module, with the checks each module makes.

Each ``test_*`` names the suite's module(s) it replays. The https-only checks of the suite (issuer and
endpoints on https) are not replayed: the local stack is http on loopback (docs/api/identity.md says how
to run the real suite against a deployment).
"""
from __future__ import annotations

import base64
import hashlib
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from authlib.jose import JsonWebKey, jwt
from chalice.test import Client

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.groups import create_app
from chalicelib.identity.oauth.clients import register_client
from tests.functional.conftest import make_tenant
from tests.functional.identity.helpers import body
from tests.functional.identity.oauth.test_routes import REDIRECT, authorize, location_params, signed_in_cookie

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
OTHER_REDIRECT = "http://127.0.0.1:8003/other-callback"


class Suite:
    """What the suite holds for a plan: the client, the browser's session, the discovered metadata."""

    def __init__(self, c: Any) -> None:
        self.c = c
        self.client_id, secret = register_client("oidf client", confidential=True,
                                                 redirect_uris=[REDIRECT, OTHER_REDIRECT], first_party=True)
        assert secret is not None
        self.secret = secret
        self.cookie = signed_in_cookie(c)
        self.meta = body(c.http.get("/.well-known/openid-configuration"))
        self.jwks = JsonWebKey.import_key_set(body(c.http.get("/.well-known/jwks.json")))

    def basic(self, client_id: str | None = None, secret: str | None = None) -> dict[str, str]:
        raw = f"{client_id or self.client_id}:{secret or self.secret}".encode()
        return {"Authorization": "Basic " + base64.b64encode(raw).decode()}

    def authorize(self, cookie: str | None = None, **params: str) -> Any:
        base = {"response_type": "code", "client_id": self.client_id, "redirect_uri": REDIRECT,
                "scope": "openid", "state": "xyz", "nonce": "n-0S6_WzA2Mj"}
        return authorize(self.c, self.cookie if cookie is None else cookie, **{**base, **params})

    def code(self, **params: str) -> str:
        got = location_params(self.authorize(**params))
        assert got.get("state") == params.get("state", "xyz"), got
        assert got["iss"] == settings().issuer, got
        assert "code" in got, got
        return got["code"]

    def token(self, form: dict[str, str], headers: dict[str, str] | None = None) -> Any:
        return self.c.http.post("/oauth2/token", headers={**FORM, **(self.basic() if headers is None else headers)},
                                body=urlencode(form))

    def exchange(self, code: str) -> dict[str, Any]:
        r = self.token({"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT})
        assert r.status_code == 200, r.body
        assert r.headers["Cache-Control"] == "no-store"
        assert r.headers["Pragma"] == "no-cache"
        return dict(body(r))

    def id_token(self, tokens: dict[str, Any], nonce: str | None = "n-0S6_WzA2Mj") -> dict[str, Any]:
        """The suite's ID token checks: signature by a JWKS key (kid), iss, aud, azp, exp, iat, nonce, at_hash."""
        raw = tokens["id_token"]
        header = jwt.decode(raw, self.jwks).header
        assert header["alg"] == "RS256"
        assert header["kid"]
        claims = jwt.decode(raw, self.jwks)
        claims.validate(now=int(clock.now()), leeway=5)
        assert claims["iss"] == self.meta["issuer"]
        assert claims["aud"] == self.client_id
        assert claims.get("azp", self.client_id) == self.client_id
        assert claims["iat"] <= clock.now() + 5 < claims["exp"] + 5
        assert claims["sub"]
        assert claims.get("nonce") == nonce
        digest = hashlib.sha256(tokens["access_token"].encode()).digest()
        assert claims["at_hash"] == base64.urlsafe_b64encode(digest[:16]).rstrip(b"=").decode()
        return dict(claims)

    def userinfo(self, token: str, how: str = "get") -> Any:
        if how == "get":
            return self.c.http.get("/userinfo", headers={"Authorization": f"Bearer {token}"})
        if how == "post-header":
            return self.c.http.post("/userinfo", headers={**FORM, "Authorization": f"Bearer {token}"}, body="")
        return self.c.http.post("/userinfo", headers=FORM, body=urlencode({"access_token": token}))


@pytest.fixture
def suite(stack: None) -> Any:
    make_tenant()
    with Client(create_app("identity")) as c:
        yield Suite(c)


# --- Basic OP ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["get", "post-header", "post-body"])
def test_oidcc_server_and_userinfo(suite: Suite, how: str) -> None:
    """oidcc-server, oidcc-userinfo-get, oidcc-userinfo-post-header, oidcc-userinfo-post-body."""
    tokens = suite.exchange(suite.code())
    assert tokens["token_type"].lower() == "bearer"
    claims = suite.id_token(tokens)
    r = suite.userinfo(tokens["access_token"], how)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    assert body(r)["sub"] == claims["sub"]


def test_oidcc_response_type_missing(suite: Suite) -> None:
    got = location_params(suite.authorize(response_type=""))
    assert got["error"] in ("unsupported_response_type", "invalid_request")
    assert got["state"] == "xyz"


def test_oidcc_ensure_request_without_nonce_succeeds_for_code_flow(suite: Suite) -> None:
    tokens = suite.exchange(suite.code(nonce=""))
    assert "nonce" not in suite.id_token(tokens, nonce=None)


@pytest.mark.parametrize("scope", ["openid profile", "openid email", "openid address", "openid phone",
                                   "openid profile email address phone", "email openid"])
def test_oidcc_scope_modules(suite: Suite, scope: str) -> None:
    """oidcc-scope-profile/-email/-address/-phone/-all, oidcc-ensure-other-scope-order-succeeds: unsupported
    scopes are ignored; what scopes_supported lists is honoured."""
    tokens = suite.exchange(suite.code(scope=scope))
    claims = suite.id_token(tokens)
    info = body(suite.userinfo(tokens["access_token"]))
    assert info["sub"] == claims["sub"]
    if "email" in scope.split():
        assert claims["email"]
        assert "email_verified" in claims
    assert set(tokens["scope"].split()) == set(scope.split()) & set(suite.meta["scopes_supported"])


@pytest.mark.parametrize("extra", [{"display": "page"}, {"display": "popup"}, {"ui_locales": "se"},
                                   {"claims_locales": "se"}, {"login_hint": "owner@example.com"},
                                   {"acr_values": "1 2"}, {"extra_param": "foobar"},
                                   {"claims": '{"id_token":{"email":{"essential":true}}}'}])
def test_oidcc_optional_parameters_succeed(suite: Suite, extra: dict[str, str]) -> None:
    """oidcc-display-page/-popup, oidcc-ui-locales, oidcc-claims-locales, oidcc-login-hint,
    oidcc-ensure-request-with-acr-values-succeeds, oidcc-ensure-request-with-unknown-parameter-succeeds,
    oidcc-claims-essential (claims_parameter_supported is false: the parameter is ignored)."""
    suite.id_token(suite.exchange(suite.code(**extra)))


def test_oidcc_prompt_login_and_prompt_none(suite: Suite) -> None:
    """oidcc-prompt-login, oidcc-prompt-none-not-logged-in, oidcc-prompt-none-logged-in."""
    r = suite.authorize(prompt="login")
    assert r.status_code == 302
    assert r.headers["Location"].startswith(settings().auth_url + "/signin?")
    assert "prompt=login" in r.headers["Location"]
    got = location_params(suite.authorize(cookie="", prompt="none"))
    assert got["error"] == "login_required"
    assert got["state"] == "xyz"
    suite.id_token(suite.exchange(suite.code(prompt="none")))


def test_oidcc_max_age(suite: Suite) -> None:
    """oidcc-max-age-1 (a session older than max_age signs in again), oidcc-max-age-10000 (auth_time)."""
    clock.advance(2)
    r = suite.authorize(max_age="1")
    assert r.status_code == 302
    assert "/signin?" in r.headers["Location"]
    claims = suite.id_token(suite.exchange(suite.code(max_age="10000")))
    assert claims["auth_time"] <= clock.now()


def test_oidcc_id_token_hint(suite: Suite) -> None:
    first = suite.exchange(suite.code())
    tokens = suite.exchange(suite.code(prompt="none", id_token_hint=first["id_token"]))
    assert suite.id_token(tokens)["sub"] == suite.id_token(first)["sub"]


@pytest.mark.parametrize("redirect", ["https://evil.example/cb", REDIRECT + "/x", ""])
def test_oidcc_ensure_registered_redirect_uri(suite: Suite, redirect: str) -> None:
    """oidcc-ensure-registered-redirect-uri, oidcc-ensure-redirect-uri-in-authorization-request: an error
    page, never a redirect."""
    r = suite.authorize(redirect_uri=redirect)
    assert r.status_code == 400
    assert "Location" not in r.headers


@pytest.mark.parametrize("param,error", [("request", "request_not_supported"),
                                         ("request_uri", "request_uri_not_supported")])
def test_oidcc_request_objects(suite: Suite, param: str, error: str) -> None:
    """oidcc-unsigned-request-object-supported-correctly-or-rejected-as-unsupported,
    oidcc-ensure-request-object-with-redirect-uri, oidcc-request-uri-unsigned: rejected as unsupported,
    as discovery says."""
    assert suite.meta[f"{param}_parameter_supported"] is False
    value = "eyJhbGciOiJub25lIn0.eyJzY29wZSI6Im9wZW5pZCJ9." if param == "request" else "https://rp.example/r"
    got = location_params(suite.authorize(**{param: value}))
    assert got["error"] == error
    assert got["state"] == "xyz"


def test_oidcc_codereuse(suite: Suite) -> None:
    """oidcc-codereuse, oidcc-codereuse-30seconds: the second use fails and the first tokens are revoked."""
    code = suite.code()
    tokens = suite.exchange(code)
    clock.advance(30)
    r = suite.token({"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT})
    assert r.status_code == 400
    assert body(r)["error"] == "invalid_grant"
    assert suite.userinfo(tokens["access_token"]).status_code == 401


def test_oidcc_refresh_token(suite: Suite) -> None:
    """oidcc-refresh-token: rotation, the new ID token's sub, another client's use refused."""
    tokens = suite.exchange(suite.code(scope="openid offline_access"))
    other_id, other_secret = register_client("oidf client 2", confidential=True, redirect_uris=[REDIRECT], first_party=True)
    assert other_secret is not None
    r = suite.token({"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]},
                    headers=suite.basic(other_id, other_secret))
    assert r.status_code == 400
    assert body(r)["error"] == "invalid_grant"
    r = suite.token({"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]})
    assert r.status_code == 200, r.body
    fresh = body(r)
    assert fresh["refresh_token"] != tokens["refresh_token"]
    assert suite.id_token(fresh, nonce=None)["sub"] == suite.id_token(tokens)["sub"]


def test_oidcc_ensure_post_request_succeeds(suite: Suite) -> None:
    form = {"response_type": "code", "client_id": suite.client_id, "redirect_uri": REDIRECT, "scope": "openid",
            "state": "xyz", "nonce": "n-0S6_WzA2Mj"}
    r = suite.c.http.post("/oauth2/authorize", headers={**FORM, "Cookie": suite.cookie}, body=urlencode(form))
    got = location_params(r)
    suite.id_token(suite.exchange(got["code"]))


def test_oidcc_server_client_secret_post(suite: Suite) -> None:
    assert "client_secret_post" in suite.meta["token_endpoint_auth_methods_supported"]
    r = suite.token({"grant_type": "authorization_code", "code": suite.code(), "redirect_uri": REDIRECT,
                     "client_id": suite.client_id, "client_secret": suite.secret}, headers={})
    assert r.status_code == 200, r.body
    suite.id_token(body(r))


# --- Config OP ---------------------------------------------------------------------------------------------

def test_oidcc_discovery_endpoint_verification(suite: Suite) -> None:
    meta = suite.meta
    assert meta["issuer"] == settings().issuer
    assert not meta["issuer"].endswith("/")
    for name in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri"):
        parts = urlsplit(meta[name])
        assert parts.scheme in ("http", "https")
        assert parts.netloc
        assert not parts.fragment  # https: not replayed
    assert "openid" in meta["scopes_supported"]
    assert "code" in meta["response_types_supported"]
    assert meta["subject_types_supported"] == ["public"]
    assert "RS256" in meta["id_token_signing_alg_values_supported"]
    assert "none" not in meta["id_token_signing_alg_values_supported"]
    assert {"authorization_code", "refresh_token"} <= set(meta["grant_types_supported"])
    assert {"client_secret_basic", "client_secret_post"} <= set(meta["token_endpoint_auth_methods_supported"])
    assert {"sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "email"} <= set(meta["claims_supported"])
    assert meta["response_modes_supported"] == ["query"]
    assert meta["claims_parameter_supported"] is False


def test_oidcc_jwks(suite: Suite) -> None:
    r = suite.c.http.get("/.well-known/jwks.json")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    keys = body(r)["keys"]
    assert keys
    assert len({k["kid"] for k in keys}) == len(keys)
    for key in keys:
        assert key["kty"] == "RSA"
        assert key["use"] == "sig"
        assert key["alg"] == "RS256"
        assert key["n"]
        assert key["e"]
        assert not {"d", "p", "q", "dp", "dq", "qi"} & set(key)  # no private parts published


def test_oidcc_idtoken_signature_and_userinfo_match_discovery(suite: Suite) -> None:
    """oidcc-idtoken-rs256 (Config OP's ID token and userinfo checks against the discovered metadata)."""
    tokens = suite.exchange(suite.code(scope="openid email profile"))
    claims = suite.id_token(tokens)
    for name in claims:
        assert name in suite.meta["claims_supported"] or name in ("workspace_id", "roles"), name
