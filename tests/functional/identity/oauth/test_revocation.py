"""Every token belongs to a session or grant and dies with it, exchanged tokens included, from the next
request on: sign-out, password reset, refresh-token reuse and member removal, each performed end to end."""
from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from chalice.test import Client

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.groups import create_app
from chalicelib.identity.oauth.clients import register_client
from chalicelib.identity.oauth.grants.token_exchange import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE
from chalicelib.identity.signin import sessions
from tests.functional.conftest import bearer, make_tenant
from tests.functional.identity.helpers import PASSWORD, body, cookie_of, make_password_user, post
from tests.functional.identity.oauth.test_routes import REDIRECT, authorize, location_params, pkce, token_call
from tests.functional.platform.helpers import add_member


@dataclass
class Grant:
    cookie: str
    client_id: str
    access: str
    refresh: str
    exchanged: str  # the access token exchanged into the second workspace
    other_workspace: str
    other_admin: str  # a token of the second workspace's Admin
    user_id: str


def _form_post(c: Any, path: str, form: dict[str, str], basic: tuple[str, str] | None = None) -> Any:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if basic:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode()
    return c.http.post(path, headers=headers, body=urlencode(form))


def _exchange(c: Any, subject: str, workspace_id: str, client_id: str | None,
              basic: tuple[str, str] | None = None) -> Any:
    form = {"grant_type": TOKEN_EXCHANGE, "subject_token": subject, "subject_token_type": ACCESS_TOKEN_TYPE,
            "workspace_id": workspace_id}
    if client_id:
        form["client_id"] = client_id
    return token_call(c, form, basic)


def _sign_in_and_grant(c: Any, email: str) -> Grant:
    """Password + TOTP sign-in, the code flow of a public client, then an exchange into a second workspace."""
    tenant = make_tenant(email)
    other = make_tenant("other-owner@example.com", name="Other")
    add_member(other.workspace_id, email, "member")
    u = make_password_user(email)
    r = post(c, "/signin/password", {"email": email, "password": PASSWORD})
    r = post(c, "/signin/mfa", {"mfa_token": body(r)["mfa_token"], "code": u.totp_now()})
    cookie = cookie_of(r)
    client_id, _ = register_client("app", confidential=False, redirect_uris=[REDIRECT], first_party=True)
    verifier, challenge = pkce()
    code = location_params(authorize(c, cookie, response_type="code", client_id=client_id, redirect_uri=REDIRECT,
                                     code_challenge=challenge, code_challenge_method="S256",
                                     workspace_id=tenant.workspace_id))["code"]
    tokens = body(token_call(c, {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
                                 "code_verifier": verifier, "client_id": client_id}))
    r = _exchange(c, tokens["access_token"], other.workspace_id, client_id)
    assert r.status_code == 200, r.body
    return Grant(cookie, client_id, tokens["access_token"], tokens["refresh_token"], body(r)["access_token"],
                 other.workspace_id, other.token, u.user_id)


def _me(p: Any, token: str) -> int:
    return p.http.get("/v1/me", headers=bearer(token)).status_code


@pytest.fixture
def clients(stack: None) -> Any:
    with Client(create_app("identity")) as c, Client(create_app("platform")) as p:
        yield c, p


def _all_alive(p: Any, g: Grant) -> None:
    assert _me(p, g.access) == 200
    assert _me(p, g.exchanged) == 200


def _all_dead(c: Any, p: Any, g: Grant) -> None:
    assert _me(p, g.access) == 401
    assert _me(p, g.exchanged) == 401
    r = token_call(c, {"grant_type": "refresh_token", "refresh_token": g.refresh, "client_id": g.client_id})
    assert r.status_code == 400
    assert _exchange(c, g.access, g.other_workspace, g.client_id).status_code == 400


def test_sign_out_kills_every_token_of_the_session(clients: Any) -> None:
    c, p = clients
    g = _sign_in_and_grant(c, "pat@example.com")
    _all_alive(p, g)
    r = post(c, "/signout", {}, headers={"Cookie": g.cookie})
    assert r.status_code == 200
    _all_dead(c, p, g)


def test_password_reset_kills_every_token_of_the_user(clients: Any, outbox: Any) -> None:
    c, p = clients
    g = _sign_in_and_grant(c, "pat@example.com")
    api = post(c, "/account/api-tokens", {"name": "ci", "workspace_id": g.other_workspace},
               headers={"Cookie": g.cookie})
    assert api.status_code == 201, api.body
    _all_alive(p, g)
    assert _me(p, body(api)["token"]) == 200
    assert post(c, "/signin/reset", {"email": "pat@example.com"}).status_code == 202
    link = outbox.last_link("pat@example.com")
    r = post(c, "/signin/reset/confirm", {"token": link.split("token=")[1], "new_password": "another long passphrase"})
    assert r.status_code == 200, r.body
    _all_dead(c, p, g)
    assert _me(p, body(api)["token"]) == 401


def test_refresh_token_reuse_kills_the_grant_and_its_session(clients: Any) -> None:
    c, p = clients
    g = _sign_in_and_grant(c, "pat@example.com")
    r = token_call(c, {"grant_type": "refresh_token", "refresh_token": g.refresh, "client_id": g.client_id})
    assert r.status_code == 200
    rotated = body(r)["access_token"]
    assert _me(p, rotated) == 200
    # the attacker replays the stolen, already rotated refresh token
    r = token_call(c, {"grant_type": "refresh_token", "refresh_token": g.refresh, "client_id": g.client_id})
    assert r.status_code == 400
    _all_dead(c, p, g)
    assert _me(p, rotated) == 401
    # the browser session behind the grant is signed out too: the cookie issues no code, the browser is
    # sent to sign in (and its dead cookie is cleared), every time it comes back
    for _ in range(2):
        _, challenge = pkce()
        r = authorize(c, g.cookie, response_type="code", client_id=g.client_id, redirect_uri=REDIRECT,
                      code_challenge=challenge, code_challenge_method="S256")
        assert r.status_code == 302
        assert r.headers["Location"].startswith(settings().auth_url + "/signin?"), r.headers["Location"]
        assert "code=" not in r.headers["Location"]
        assert "Max-Age=0" in r.headers["Set-Cookie"]
    assert c.http.get("/account/sessions", headers={"Cookie": g.cookie}).status_code == 401
    assert not sessions.list_sessions(g.user_id)


def test_member_removal_kills_tokens_for_that_workspace_exchanged_ones_included(clients: Any) -> None:
    c, p = clients
    g = _sign_in_and_grant(c, "pat@example.com")
    _all_alive(p, g)
    r = p.http.delete(f"/v1/workspaces/{g.other_workspace}/members/{g.user_id}", headers=bearer(g.other_admin))
    assert r.status_code in (200, 204), r.body
    r = p.http.get(f"/v1/workspaces/{g.other_workspace}", headers=bearer(g.exchanged))
    assert r.status_code in (401, 403, 404)
    assert _exchange(c, g.access, g.other_workspace, g.client_id).status_code == 400  # invalid_target


def test_exchange_never_outlives_the_subject_token(clients: Any) -> None:
    c, p = clients
    g = _sign_in_and_grant(c, "pat@example.com")
    from chalicelib.core.tokens import verifier

    subject = verifier().claims(g.access)
    clock.advance(200)
    first = body(_exchange(c, g.access, g.other_workspace, g.client_id))
    again = body(_exchange(c, first["access_token"], g.other_workspace, g.client_id))
    for issued in (first, again):
        claims = verifier().claims(issued["access_token"])
        assert claims["exp"] <= subject["exp"]
        assert claims["sid"] == subject["sid"]
        assert claims["grant_id"] == subject["grant_id"]
    clock.advance(subject["exp"] - clock.now() + 1)
    assert _me(p, again["access_token"]) == 401


def test_exchange_only_by_the_client_the_token_was_issued_to(clients: Any) -> None:
    c, _ = clients
    g = _sign_in_and_grant(c, "pat@example.com")
    other_public, _ = register_client("other app", confidential=False, redirect_uris=[REDIRECT], first_party=True)
    confidential, secret = register_client("third party", confidential=True, redirect_uris=[REDIRECT], first_party=True)
    assert _exchange(c, g.access, g.other_workspace, other_public).status_code == 400
    assert _exchange(c, g.access, g.other_workspace, None, basic=(confidential, secret)).status_code == 400
    assert _exchange(c, g.access, g.other_workspace, None).status_code == 400
    assert _exchange(c, g.access, g.other_workspace, g.client_id).status_code == 200


def test_oauth2_revoke_accepts_an_exchanged_token(clients: Any) -> None:
    c, p = clients
    g = _sign_in_and_grant(c, "pat@example.com")
    r = _form_post(c, "/oauth2/revoke", {"token": g.exchanged, "client_id": g.client_id})
    assert r.status_code == 200, r.body
    assert _me(p, g.exchanged) == 401
    assert _me(p, g.access) == 200
