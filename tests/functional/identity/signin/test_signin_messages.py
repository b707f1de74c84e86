"""Sign-in messages that say what happened: a reused authenticator code, and an MFA-enforced workspace
reached with an e-mailed code alone (a hosted page, not ``access_denied`` in the client's URL)."""
import html
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from chalice.test import Client

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.groups import create_app
from chalicelib.identity.mfa import totp
from chalicelib.identity.oauth.clients import register_client
from chalicelib.identity.signin import lockout
from tests.functional.conftest import make_tenant
from tests.functional.identity.helpers import PASSWORD, body, cookie_of, make_password_user, post
from tests.functional.identity.oauth.test_routes import pkce

REDIRECT = "http://127.0.0.1:8003/callback"


def _password_step(c: Any, email: str) -> str:
    r = post(c, "/signin/password", {"email": email, "password": PASSWORD})
    assert r.status_code == 200, r.body
    return body(r)["mfa_token"]


def test_reused_totp_code_says_so_and_is_not_a_lockout_strike(stack: None) -> None:
    u = make_password_user("reuse@example.com")
    with Client(create_app("identity")) as c, clock.frozen():
        code = u.totp_now()
        r = post(c, "/signin/mfa", {"mfa_token": _password_step(c, u.email), "code": code})
        assert r.status_code == 200, r.body
        for _ in range(lockout.MAX_FAILURES + 2):  # more reuses than the lockout allows wrong codes
            r = post(c, "/signin/mfa", {"mfa_token": _password_step(c, u.email), "code": code})
            assert r.status_code == 401, r.body
            assert body(r)["code"] == "code_already_used", r.body
            assert "already used" in body(r)["detail"]
        assert lockout.status(u.user_id)["failed_attempts"] == 0
        assert not lockout.is_locked(u.user_id)
        wrong = "000000" if code != "000000" else "111111"
        r = post(c, "/signin/mfa", {"mfa_token": _password_step(c, u.email), "code": wrong})
        assert r.status_code == 401
        assert body(r)["code"] == "invalid_code"
        assert lockout.status(u.user_id)["failed_attempts"] == 1  # a wrong code still counts
        clock.advance(30)
        r = post(c, "/signin/mfa", {"mfa_token": _password_step(c, u.email), "code": u.totp_now()})
        assert r.status_code == 200, r.body  # the next step's code signs in
        assert totp.check_totp(u.user_id, u.totp_now()) == totp.REUSED


def _sign_in_by_email_code(c: Any, outbox: Any, email: str, return_to: str) -> Any:
    assert post(c, "/signin/email-code", {"email": email}).status_code == 202
    r = post(c, "/signin/email-code/verify", {"email": email, "code": outbox.last_code(email),
                                              "return_to": return_to})
    assert r.status_code == 200, r.body
    return r


def _authorize_return_to(c: Any, client_id: str, **extra: str) -> str:
    _, challenge = pkce()
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "scope": "openid",
              "code_challenge": challenge, "code_challenge_method": "S256", "state": "s1", **extra}
    r = c.http.get("/oauth2/authorize?" + urlencode(params))
    assert r.status_code == 302
    assert "/signin?" in r.headers["Location"]
    return parse_qs(urlsplit(r.headers["Location"]).query)["return_to"][0]


def test_mfa_enforced_member_signing_in_by_email_code_gets_a_page_with_the_way_forward(outbox: Any) -> None:
    tenant = make_tenant("enforced@example.com", name="Vault & Co", enforce_mfa=True)
    client_id, _ = register_client("app shell", confidential=False, redirect_uris=[REDIRECT], first_party=True)
    with Client(create_app("identity")) as c:
        return_to = _authorize_return_to(c, client_id, workspace_id=tenant.workspace_id)
        r = _sign_in_by_email_code(c, outbox, tenant.email, return_to)
        target = body(r)["redirect_to"]
        assert target.startswith(settings().auth_url + "/signin/mfa-required?")
        assert "access_denied" not in target
        assert "error" not in parse_qs(urlsplit(target).query)
        cookie = cookie_of(r)
        page = c.http.get(urlsplit(target).path + "?" + urlsplit(target).query,
                          headers={"Accept": "text/html", "Cookie": cookie})
        text = page.body.decode()
        assert page.status_code == 200
        assert page.headers["Content-Type"].startswith("text/html")
        assert "requires multi-factor authentication" in text
        assert html.escape("“Vault & Co”") in text
        assert 'href="/account"' in text  # set up a second factor (the session is kept for that)
        again = html.unescape(text.split('id="sign-in-again" href="')[1].split('"')[0])
        assert again.startswith("/oauth2/authorize?")
        assert "prompt=login" in again
        assert "state=s1" in again
        assert c.http.get("/account", headers={"Accept": "text/html", "Cookie": cookie}).status_code == 200
        # the link starts a fresh sign-in (prompt=login) instead of failing again on the one-factor session
        r = c.http.get(again, headers={"Cookie": cookie})
        assert r.status_code == 302
        assert r.headers["Location"].startswith(settings().auth_url + "/signin?")
        # someone without the session learns nothing about the workspace
        stranger = c.http.get(urlsplit(target).path + "?" + urlsplit(target).query, headers={"Accept": "text/html"})
        assert "Vault" not in stranger.body.decode()
        assert 'href="/account"' not in stranger.body.decode()


def test_email_code_to_a_workspace_without_enforced_mfa_goes_straight_back(outbox: Any) -> None:
    tenant = make_tenant("relaxed@example.com", name="Open Co", enforce_mfa=False)
    client_id, _ = register_client("app shell", confidential=False, redirect_uris=[REDIRECT], first_party=True)
    with Client(create_app("identity")) as c:
        return_to = _authorize_return_to(c, client_id, workspace_id=tenant.workspace_id)
        r = _sign_in_by_email_code(c, outbox, tenant.email, return_to)
        assert body(r)["redirect_to"] == settings().auth_url + return_to


def test_mfa_required_page_refuses_foreign_return_to(stack: None) -> None:
    with Client(create_app("identity")) as c:
        q = urlencode({"workspace_id": "ws_x", "return_to": "https://evil.example/oauth2/authorize?x=1"})
        text = c.http.get("/signin/mfa-required?" + q, headers={"Accept": "text/html"}).body.decode()
        assert "evil.example" not in text
        assert 'href="/signin"' in text


def test_settings_say_a_reused_authenticator_code_was_used(stack: None) -> None:
    from tests.functional.identity.account.test_routes import call, sign_in

    u = make_password_user("settings.reuse@example.com")
    with Client(create_app("identity")) as c, clock.frozen():
        cookie = sign_in(c, u)  # answers the MFA step with the current code
        r = call(c, "POST", "/account/recovery-codes", cookie, {"code": u.totp_now()})
        assert r.status_code == 400, r.body
        assert body(r)["code"] == "code_already_used", r.body
        clock.advance(30)
        r = call(c, "POST", "/account/recovery-codes", cookie, {"code": u.totp_now()})
        assert r.status_code == 200, r.body
