"""RP-initiated logout at the identity service (GET /oauth2/logout, used by the web app's sign-out):
a valid ID token of the session's user ends the session and returns to the client's origin; a forged
or foreign hint, or a redirect to another origin, does not (attacks performed end to end)."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from chalice.test import Client

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.groups import create_app
from chalicelib.identity.oauth.clients import register_client
from chalicelib.identity.signin import sessions
from tests.functional.conftest import make_tenant
from tests.functional.identity.oauth.test_routes import (
    REDIRECT,
    authorize,
    location_params,
    pkce,
    signed_in_cookie,
    token_call,
)

APP_ORIGIN = "http://127.0.0.1:8003"


def _id_token(c: Any, cookie: str, client_id: str) -> str:
    verifier, challenge = pkce()
    got = location_params(authorize(c, cookie, response_type="code", client_id=client_id, redirect_uri=REDIRECT,
                                    scope="openid email", state="s1", code_challenge=challenge,
                                    code_challenge_method="S256"))
    r = token_call(c, {"grant_type": "authorization_code", "code": got["code"], "redirect_uri": REDIRECT,
                       "client_id": client_id, "code_verifier": verifier})
    assert r.status_code == 200, r.body
    return r.json_body["id_token"]


def _logout(c: Any, cookie: str, **params: str) -> Any:
    return c.http.get("/oauth2/logout?" + urlencode(params), headers={"Cookie": cookie})


def _alive(cookie: str) -> bool:
    sid = cookie.split("=", 1)[1].split(";")[0]
    return sessions.get_by_sid(sid) is not None


def test_valid_hint_ends_session_and_returns_to_client_origin(stack: None) -> None:
    make_tenant()
    client_id, _ = register_client("app shell", confidential=False, redirect_uris=[REDIRECT], first_party=True)
    with Client(create_app("identity")) as c:
        cookie = signed_in_cookie(c)
        hint = _id_token(c, cookie, client_id)
        clock.advance(3 * 3600)  # an expired ID token is still a valid hint
        r = _logout(c, cookie, client_id=client_id, id_token_hint=hint,
                    post_logout_redirect_uri=APP_ORIGIN + "/signed-out", state="xyz")
        assert r.status_code == 302
        assert r.headers["Location"] == APP_ORIGIN + "/signed-out?state=xyz"
        assert "Max-Age=0" in r.headers["Set-Cookie"]
        assert not _alive(cookie)
        assert c.http.get("/.well-known/openid-configuration").json_body["end_session_endpoint"] == \
            settings().auth_url + "/oauth2/logout"


def test_forged_or_foreign_hint_keeps_session(stack: None) -> None:
    make_tenant()
    client_id, _ = register_client("app shell", confidential=False, redirect_uris=[REDIRECT], first_party=True)
    other_client, _ = register_client("other", confidential=False, redirect_uris=["http://127.0.0.1:9999/cb"], first_party=True)
    with Client(create_app("identity")) as c:
        victim = signed_in_cookie(c)
        attacker = signed_in_cookie(c, "mallory@example.com")
        attacker_hint = _id_token(c, attacker, client_id)
        victim_hint = _id_token(c, victim, client_id)
        head, payload, sig = victim_hint.split(".")
        forged = f"{head}.{payload}.{sig[:-4]}AAAA"
        for params in ({"id_token_hint": attacker_hint, "client_id": client_id},  # another user's token
                       {"id_token_hint": forged, "client_id": client_id},  # signature broken
                       {"id_token_hint": victim_hint, "client_id": other_client},  # issued to another client
                       {"client_id": client_id}):  # no hint: a cross-site link cannot sign anyone out
            r = _logout(c, victim, **params)
            assert r.status_code == 200, params
            assert "still signed in" in r.body.decode(), params
            assert _alive(victim), params


def test_redirect_only_to_a_registered_origin(stack: None) -> None:
    make_tenant()
    client_id, _ = register_client("app shell", confidential=False, redirect_uris=[REDIRECT], first_party=True)
    with Client(create_app("identity")) as c:
        cookie = signed_in_cookie(c)
        hint = _id_token(c, cookie, client_id)
        for target in ("https://evil.example/signed-out", "http://127.0.0.1:8004/x", "javascript:alert(1)", "//evil.example"):
            r = _logout(c, cookie, client_id=client_id, id_token_hint=hint, post_logout_redirect_uri=target)
            assert r.status_code == 200, target
            assert "Location" not in r.headers, target
