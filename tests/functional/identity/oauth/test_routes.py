"""Our OAuth 2.0 / OIDC provider, driven by an independent client library (authlib)."""
import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey, jwt
from authlib.oidc.core import CodeIDToken
from chalice.test import Client

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.groups import create_app
from chalicelib.identity.oauth.clients import register_client
from tests.functional.chalice_requests import ChaliceAdapter
from tests.functional.conftest import make_tenant
from tests.functional.identity.helpers import PASSWORD, body, cookie_of, make_password_user, post

REDIRECT = "http://127.0.0.1:8003/callback"


def signed_in_cookie(c: Any, email: str = "owner@example.com") -> str:
    u = make_password_user(email)
    r = post(c, "/signin/password", {"email": u.email, "password": PASSWORD})
    assert r.status_code == 200, r.body
    r = post(c, "/signin/mfa", {"mfa_token": body(r)["mfa_token"], "code": u.totp_now()})
    assert r.status_code == 200, r.body
    return cookie_of(r)


def email_code_cookie(c: Any, email: str, outbox: Any) -> str:
    r = post(c, "/signin/email-code", {"email": email})
    assert r.status_code == 202
    code = outbox.last_code(email)
    r = post(c, "/signin/email-code/verify", {"email": email, "code": code})
    assert r.status_code == 200, r.body
    return cookie_of(r)


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorize(c: Any, cookie: str, **params: str) -> Any:
    return c.http.get("/oauth2/authorize?" + urlencode(params), headers={"Cookie": cookie} if cookie else {})


def location_params(r: Any) -> dict[str, str]:
    assert r.status_code == 302, r.body
    return {k: v[0] for k, v in parse_qs(urlsplit(r.headers["Location"]).query).items()}


def token_call(c: Any, form: dict[str, str], basic: tuple[str, str] | None = None) -> Any:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if basic:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode()
    return c.http.post("/oauth2/token", headers=headers, body=urlencode(form))


@pytest.fixture
def public_client(stack: None) -> str:
    client_id, _ = register_client("app shell", confidential=False, redirect_uris=[REDIRECT], first_party=True)
    return client_id


def test_authlib_completes_code_flow_with_pkce_and_verifies_id_token(public_client: str) -> None:
    tenant = make_tenant()
    issuer = settings().issuer
    with Client(create_app("identity")) as c:
        cookie = signed_in_cookie(c)
        session = OAuth2Session(public_client, scope="openid email", redirect_uri=REDIRECT,
                                code_challenge_method="S256", token_endpoint_auth_method="none")
        session.mount(issuer, ChaliceAdapter(c))
        discovery = session.get(f"{issuer}/.well-known/openid-configuration", withhold_token=True).json()
        assert "S256" in discovery["code_challenge_methods_supported"]
        for name in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "revocation_endpoint",
                     "introspection_endpoint", "jwks_uri"):
            assert discovery[name].startswith(issuer)
        assert {"authorization_code", "refresh_token", "client_credentials"} <= set(discovery["grant_types_supported"])
        verifier = secrets.token_urlsafe(48)
        nonce = secrets.token_urlsafe(16)
        url, state = session.create_authorization_url(discovery["authorization_endpoint"], nonce=nonce,
                                                      code_verifier=verifier)
        # the browser part: our authorize endpoint with the session cookie
        r = c.http.get(url[len(issuer):], headers={"Cookie": cookie})
        assert r.status_code == 302
        callback = r.headers["Location"]
        assert callback.startswith(REDIRECT)
        assert f"state={state}" in callback
        token = session.fetch_token(discovery["token_endpoint"], authorization_response=callback,
                                    code_verifier=verifier)
        assert token["token_type"].lower() == "bearer"
        assert token["refresh_token"]
        jwks = JsonWebKey.import_key_set(session.get(discovery["jwks_uri"], withhold_token=True).json())
        claims = jwt.decode(token["id_token"], jwks, claims_cls=CodeIDToken,
                            claims_options={"iss": {"essential": True, "value": issuer}},
                            claims_params={"nonce": nonce, "client_id": public_client,
                                           "access_token": token["access_token"]})
        claims.validate(now=int(clock.now()), leeway=5)  # aud, exp, iat, nonce, at_hash, auth_time
        assert claims["sub"] == tenant.user_id
        assert claims["aud"] == public_client
        assert claims["nonce"] == nonce
        assert "mfa" in claims["amr"]
        assert claims["workspace_id"] == tenant.workspace_id
        # the access token is a platform token for that workspace, with the user's roles there
        info = session.get(discovery["userinfo_endpoint"]).json()  # authlib adds the Bearer token
        assert info["sub"] == tenant.user_id
        assert info["roles"] == ["admin"]
        # a refresh through authlib rotates the refresh token
        refreshed = session.refresh_token(discovery["token_endpoint"], refresh_token=token["refresh_token"])
        assert refreshed["refresh_token"] != token["refresh_token"]


def test_wrong_redirect_uri_is_refused_without_redirect(public_client: str) -> None:
    _, challenge = pkce()
    with Client(create_app("identity")) as c:
        cookie = signed_in_cookie(c)
        for uri in ("http://127.0.0.1:8003/callback/", "http://127.0.0.1:8003/other", "https://evil.example/cb", ""):
            r = authorize(c, cookie, response_type="code", client_id=public_client, redirect_uri=uri,
                          code_challenge=challenge, code_challenge_method="S256", state="s")
            assert r.status_code == 400, uri
            assert "Location" not in r.headers
            assert body(r)["error"] == "invalid_request"
        r = c.http.get("/oauth2/authorize?" + urlencode([("response_type", "code"), ("client_id", public_client),
                                                         ("redirect_uri", REDIRECT), ("redirect_uri", "https://evil.example/"),
                                                         ("code_challenge", challenge), ("code_challenge_method", "S256")]),
                       headers={"Cookie": cookie})
        assert r.status_code == 400
        assert "Location" not in r.headers
        r = authorize(c, cookie, response_type="code", client_id="cli_unknown", redirect_uri=REDIRECT,
                      code_challenge=challenge, code_challenge_method="S256")
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_request"


def test_pkce_is_mandatory_and_s256_only(public_client: str) -> None:
    verifier, challenge = pkce()
    with Client(create_app("identity")) as c:
        cookie = signed_in_cookie(c)
        base = {"response_type": "code", "client_id": public_client, "redirect_uri": REDIRECT, "state": "xyz"}
        p = location_params(authorize(c, cookie, **base))
        assert p["error"] == "invalid_request"
        assert p["state"] == "xyz"
        assert "code" not in p
        p = location_params(authorize(c, cookie, **base, code_challenge=verifier, code_challenge_method="plain"))
        assert p["error"] == "invalid_request"
        assert "code" not in p
        p = location_params(authorize(c, cookie, **{**base, "response_type": "token"}, code_challenge=challenge,
                                      code_challenge_method="S256"))
        assert p["error"] == "unsupported_response_type"


def _code(c: Any, cookie: str, client_id: str, challenge: str, **extra: str) -> str:
    p = location_params(authorize(c, cookie, response_type="code", client_id=client_id, redirect_uri=REDIRECT,
                                  code_challenge=challenge, code_challenge_method="S256", scope="openid",
                                  state="st", **extra))
    assert "code" in p, p
    assert p["iss"] == settings().issuer
    return p["code"]


def test_reused_code_is_refused_and_revokes_its_tokens(public_client: str) -> None:
    make_tenant()
    verifier, challenge = pkce()
    with Client(create_app("identity")) as c:
        cookie = signed_in_cookie(c)
        code = _code(c, cookie, public_client, challenge)
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
                "client_id": public_client, "code_verifier": verifier}
        r = token_call(c, form)
        assert r.status_code == 200, r.body
        first = body(r)
        r = c.http.get("/userinfo", headers={"Authorization": f"Bearer {first['access_token']}"})
        assert r.status_code == 200
        r = token_call(c, form)
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_grant"
        # the access and refresh tokens issued from the code are dead now
        r = c.http.get("/userinfo", headers={"Authorization": f"Bearer {first['access_token']}"})
        assert r.status_code == 401
        r = token_call(c, {"grant_type": "refresh_token", "refresh_token": first["refresh_token"],
                           "client_id": public_client})
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_grant"


def test_wrong_verifier_wrong_redirect_and_expired_code_are_refused(public_client: str) -> None:
    make_tenant()
    verifier, challenge = pkce()
    with Client(create_app("identity")) as c:
        cookie = signed_in_cookie(c)
        base = {"grant_type": "authorization_code", "redirect_uri": REDIRECT, "client_id": public_client}
        r = token_call(c, {**base, "code": _code(c, cookie, public_client, challenge),
                           "code_verifier": pkce()[0]})
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_grant"
        r = token_call(c, {**base, "code": _code(c, cookie, public_client, challenge)})
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_grant"  # no verifier at all
        r = token_call(c, {**base, "code": _code(c, cookie, public_client, challenge), "code_verifier": verifier,
                           "redirect_uri": REDIRECT + "x"})
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_grant"
        code = _code(c, cookie, public_client, challenge)
        clock.advance(61)
        r = token_call(c, {**base, "code": code, "code_verifier": verifier})
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_grant"


def test_refresh_token_reuse_revokes_the_family(public_client: str) -> None:
    make_tenant()
    verifier, challenge = pkce()
    with Client(create_app("identity")) as c:
        cookie = signed_in_cookie(c)
        r = token_call(c, {"grant_type": "authorization_code", "redirect_uri": REDIRECT, "client_id": public_client,
                           "code": _code(c, cookie, public_client, challenge), "code_verifier": verifier})
        first = body(r)
        r = token_call(c, {"grant_type": "refresh_token", "refresh_token": first["refresh_token"],
                           "client_id": public_client})
        assert r.status_code == 200, r.body
        second = body(r)
        assert second["refresh_token"] != first["refresh_token"]
        # the old one comes back (stolen): refused, and the whole family dies
        r = token_call(c, {"grant_type": "refresh_token", "refresh_token": first["refresh_token"],
                           "client_id": public_client})
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_grant"
        r = token_call(c, {"grant_type": "refresh_token", "refresh_token": second["refresh_token"],
                           "client_id": public_client})
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_grant"
        for access in (first["access_token"], second["access_token"]):
            assert c.http.get("/userinfo", headers={"Authorization": f"Bearer {access}"}).status_code == 401


def test_mfa_enforced_workspace_refuses_a_sign_in_without_mfa(public_client: str, outbox: Any) -> None:
    tenant = make_tenant("lee@example.com", enforce_mfa=True, name="Strict")
    verifier, challenge = pkce()
    with Client(create_app("identity")) as c:
        cookie = email_code_cookie(c, "lee@example.com", outbox)  # amr ["email"]: one factor
        p = location_params(authorize(c, cookie, response_type="code", client_id=public_client,
                                      redirect_uri=REDIRECT, code_challenge=challenge, code_challenge_method="S256",
                                      workspace_id=tenant.workspace_id, state="s"))
        assert p["error"] == "access_denied"
        assert "code" not in p
        # and the token endpoint checks again: a code from before MFA was enforced is refused
        other = make_tenant("lee@example.com", name="Loose")
        code = _code(c, cookie, public_client, challenge, workspace_id=other.workspace_id)
        from chalicelib.core.tenancy import workspaces
        workspaces()(other.workspace_id).update(actions=[workspaces().enforce_mfa.set(True)])
        r = token_call(c, {"grant_type": "authorization_code", "redirect_uri": REDIRECT, "client_id": public_client,
                           "code": code, "code_verifier": verifier})
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_grant"


def test_no_session_redirects_to_sign_in_and_prompt_none_fails(public_client: str) -> None:
    _, challenge = pkce()
    with Client(create_app("identity")) as c:
        params = {"response_type": "code", "client_id": public_client, "redirect_uri": REDIRECT,
                  "code_challenge": challenge, "code_challenge_method": "S256", "state": "s1"}
        r = authorize(c, "", **params)
        assert r.status_code == 302
        loc = urlsplit(r.headers["Location"])
        assert r.headers["Location"].startswith(settings().auth_url + "/signin?")
        return_to = parse_qs(loc.query)["return_to"][0]
        assert return_to.startswith("/oauth2/authorize?")
        assert "state=s1" in return_to
        p = location_params(authorize(c, "", **params, prompt="none"))
        assert p["error"] == "login_required"
        assert p["state"] == "s1"
        # prompt=login with a session still goes to the sign-in page, asking for a fresh sign-in
        cookie = signed_in_cookie(c)
        r = authorize(c, cookie, **params, prompt="login")
        assert r.status_code == 302
        assert "prompt=login" in r.headers["Location"]
        assert "/signin?" in r.headers["Location"]


def test_client_credentials_and_introspection_of_revoked_token(stack: None) -> None:
    tenant = make_tenant()
    client_id, secret = register_client("etl", confidential=True, grant_types=["client_credentials"],
                                        workspace_id=tenant.workspace_id, roles=["viewer"])
    intro_id, intro_secret = register_client("gateway", confidential=True, grant_types=["client_credentials"],
                                             workspace_id=tenant.workspace_id, roles=["viewer"])
    with Client(create_app("identity")) as c:
        r = token_call(c, {"grant_type": "client_credentials"}, basic=(client_id, secret))
        assert r.status_code == 200, r.body
        tok = body(r)
        assert "refresh_token" not in tok
        assert tok["workspace_id"] == tenant.workspace_id
        r = c.http.post("/oauth2/introspect", headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Authorization": "Basic " + base64.b64encode(f"{intro_id}:{intro_secret}".encode()).decode()},
            body=urlencode({"token": tok["access_token"]}))
        info = body(r)
        assert info["active"] is True
        assert info["sub"] == client_id
        assert info["roles"] == ["viewer"]
        assert info["token_use"] == "service"
        # RFC 7009 revocation by the client that owns it, then introspection says inactive
        r = c.http.post("/oauth2/revoke", headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()},
            body=urlencode({"token": tok["access_token"], "token_type_hint": "access_token"}))
        assert r.status_code == 200, r.body
        r = c.http.post("/oauth2/introspect", headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Authorization": "Basic " + base64.b64encode(f"{intro_id}:{intro_secret}".encode()).decode()},
            body=urlencode({"token": tok["access_token"]}))
        assert body(r) == {"active": False}
        # wrong secret, and a public client, cannot use client_credentials
        r = token_call(c, {"grant_type": "client_credentials"}, basic=(client_id, "wrong"))
        assert r.status_code == 401
        assert body(r)["error"] == "invalid_client"


def test_token_and_revoke_bad_input_are_oauth_errors(public_client: str) -> None:
    with Client(create_app("identity")) as c:
        r = token_call(c, {"grant_type": "authorization_code", "client_id": public_client})
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_request"
        assert r.headers["Content-Type"] == "application/json"  # RFC 6749 section 5.2, not problem+json
        assert set(body(r)) == {"error", "error_description"}
        r = token_call(c, {"grant_type": "refresh_token", "refresh_token": "rt_nope", "client_id": public_client})
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_grant"
        r = token_call(c, {"grant_type": "authorization_code", "code": "x", "client_id": "cli_nobody"})
        assert r.status_code == 401
        assert body(r)["error"] == "invalid_client"
        r = c.http.post("/oauth2/revoke", headers={"Content-Type": "application/x-www-form-urlencoded"},
                        body=urlencode({"client_id": public_client}))
        assert r.status_code == 400
        assert body(r)["error"] == "invalid_request"
        # unknown tokens: 200 per RFC 7009
        r = c.http.post("/oauth2/revoke", headers={"Content-Type": "application/x-www-form-urlencoded"},
                        body=urlencode({"client_id": public_client, "token": "rt_unknown"}))
        assert r.status_code == 200
        r = c.http.get("/userinfo")
        assert r.status_code == 401
        r = authorize(c, "", response_type="code", client_id=public_client, redirect_uri=REDIRECT,
                      code_challenge="short", code_challenge_method="S256")
        # no session yet, but a malformed challenge is refused before the sign-in detour
        assert r.status_code == 302
        assert "error=invalid_request" in r.headers["Location"]
