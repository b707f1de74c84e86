"""Account settings API (cookie session + CSRF): sessions, API tokens, TOTP, recovery codes, password;
Admin MFA reset."""
import json
from typing import Any

import pyotp
from chalice.test import Client

from chalicelib.core import audit, clock, tokens
from chalicelib.core.tenancy import memberships
from chalicelib.groups import create_app
from chalicelib.identity.mfa import factors as mfa
from chalicelib.identity.mfa import recovery_codes
from tests.functional.conftest import bearer, make_tenant
from tests.functional.identity.helpers import JSON_HEADERS, PASSWORD, body, cookie_of, make_password_user, post


def sign_in(c: Any, u: Any) -> str:
    r = post(c, "/signin/password", {"email": u.email, "password": u.password})
    r = post(c, "/signin/mfa", {"mfa_token": body(r)["mfa_token"], "code": u.totp_now()})
    assert r.status_code == 200, r.body
    return cookie_of(r)


def email_sign_in(c: Any, outbox: Any, email: str) -> str:
    post(c, "/signin/email-code", {"email": email})
    r = post(c, "/signin/email-code/verify", {"email": email, "code": outbox.last_code(email)})
    assert r.status_code == 200, r.body
    return cookie_of(r)


def call(c: Any, method: str, path: str, cookie: str, payload: Any = None, headers: dict | None = None) -> Any:
    h = {**JSON_HEADERS, "Cookie": cookie, **(headers or {})}
    return c.http.request(method, path, headers=h, body=json.dumps(payload) if payload is not None else b"")


def test_sessions_list_and_revoke(stack: None) -> None:
    u = make_password_user()
    with Client(create_app("identity")) as c:
        first = sign_in(c, u)
        clock.advance(31)
        second = sign_in(c, u)
        r = call(c, "GET", "/account/sessions", second)
        listed = body(r)["sessions"]
        assert len(listed) == 2
        assert sum(s["current"] for s in listed) == 1
        other = next(s for s in listed if not s["current"])
        assert other["amr"] == ["mfa", "otp", "pwd"]
        # CSRF: a foreign Origin cannot revoke
        r = call(c, "DELETE", f"/account/sessions/{other['id']}", second, headers={"Origin": "https://evil.example"})
        assert r.status_code == 403
        r = call(c, "DELETE", f"/account/sessions/{other['id']}", second)
        assert r.status_code == 200
        assert call(c, "GET", "/account", first).status_code == 401
        assert call(c, "GET", "/account", second).status_code == 200
        assert call(c, "DELETE", "/account/sessions/sess_01ARZ3NDEKTSV4RRFFQ69G5FAV", second).status_code == 404
        # sign out ends the session and clears the cookie
        r = call(c, "POST", "/signout", second, {})
        assert r.status_code == 200
        assert "Max-Age=0" in r.headers["Set-Cookie"]
        assert call(c, "GET", "/account/sessions", second).status_code == 401


def test_api_token_lifecycle_and_revocation_everywhere_at_once(stack: None) -> None:
    tenant = make_tenant()
    u = make_password_user(tenant.email)
    with Client(create_app("identity")) as c:
        cookie = sign_in(c, u)
        r = call(c, "POST", "/account/api-tokens", cookie, {"name": "ci", "workspace_id": tenant.workspace_id,
                                                             "expires_in_days": 7})
        assert r.status_code == 201, r.body
        created = body(r)
        token = created["token"]
        assert created["status"] == "active"
        assert created["roles"] == ["admin"]
        listed = body(call(c, "GET", "/account/api-tokens", cookie))["api_tokens"]
        assert [t["id"] for t in listed] == [created["id"]]
        assert "token" not in listed[0]
        # another process verified (and cached) the token before the revocation
        other_process = tokens.TokenVerifier()
        assert other_process.claims(token)["token_use"] == "api"
        with Client(create_app("platform")) as p:
            assert p.http.get("/v1/me", headers=bearer(token)).status_code == 200
            r = call(c, "DELETE", f"/account/api-tokens/{created['id']}", cookie)
            assert r.status_code == 200
            assert body(r)["status"] == "revoked"
            # this process refuses at once
            assert p.http.get("/v1/me", headers=bearer(token)).status_code == 401
        # the other process refuses at once too: revocation is read on every request, never cached
        try:
            other_process.claims(token)
            raise AssertionError("revoked token accepted by another process")
        except Exception as err:  # noqa: BLE001
            assert getattr(err, "status", None) == 401
        # bad input
        for payload in ({"name": "x"}, {"name": "x", "workspace_id": "nope"},
                        {"name": "x", "workspace_id": tenant.workspace_id, "expires_in_days": 91},
                        {"name": "", "workspace_id": tenant.workspace_id}):
            r = call(c, "POST", "/account/api-tokens", cookie, payload)
            assert r.status_code == 400, payload
        other = make_tenant("someone@example.com", name="Not mine")
        r = call(c, "POST", "/account/api-tokens", cookie, {"name": "x", "workspace_id": other.workspace_id})
        assert r.status_code == 404
        assert call(c, "DELETE", "/account/api-tokens/tok_01ARZ3NDEKTSV4RRFFQ69G5FAV", cookie).status_code == 404


def test_api_token_for_mfa_workspace_needs_an_mfa_session(outbox: Any) -> None:
    tenant = make_tenant("kim@example.com", enforce_mfa=True)
    with Client(create_app("identity")) as c:
        cookie = email_sign_in(c, outbox, "kim@example.com")
        r = call(c, "POST", "/account/api-tokens", cookie, {"name": "x", "workspace_id": tenant.workspace_id})
        assert r.status_code == 403
        assert body(r)["code"] == "mfa_required"


def test_totp_setup_confirm_then_password_and_recovery_regeneration(outbox: Any) -> None:
    with Client(create_app("identity")) as c:
        cookie = email_sign_in(c, outbox, "new@example.com")
        # no second factor yet: a password cannot be set
        r = call(c, "POST", "/account/password", cookie, {"new_password": "my long passphrase"})
        assert r.status_code == 409
        assert body(r)["code"] == "mfa_setup_required"
        r = call(c, "POST", "/account/totp/setup", cookie, {})
        assert r.status_code == 200
        secret = body(r)["secret"]
        assert body(r)["otpauth_uri"].startswith("otpauth://totp/")
        r = call(c, "POST", "/account/totp/confirm", cookie, {"code": "000000" if pyotp.TOTP(secret).now() != "000000" else "111111"})
        assert r.status_code == 400
        r = call(c, "POST", "/account/totp/confirm", cookie, {"code": pyotp.TOTP(secret).now()})
        assert r.status_code == 200, r.body
        codes = body(r)["recovery_codes"]
        assert len(codes) == 10
        assert call(c, "POST", "/account/totp/setup", cookie, {}).status_code == 409
        r = call(c, "POST", "/account/password", cookie, {"new_password": "my long passphrase"})
        assert r.status_code == 200, r.body
        # change requires the current password
        r = call(c, "POST", "/account/password", cookie, {"new_password": "another passphrase"})
        assert r.status_code == 400
        r = call(c, "POST", "/account/password", cookie, {"current_password": "wrong one!", "new_password": "a different passphrase"})
        assert r.status_code == 400
        assert body(r)["code"] == "invalid_current_password"
        # password sign-in now works with the authenticator
        r = post(c, "/signin/password", {"email": "new@example.com", "password": "my long passphrase"})
        assert r.status_code == 200
        assert "totp" in body(r)["methods"]
        # regenerate recovery codes: needs a fresh TOTP code; the old codes stop working
        clock.advance(30)
        r = call(c, "POST", "/account/recovery-codes", cookie, {"code": pyotp.TOTP(secret).at(clock.now())})
        assert r.status_code == 200, r.body
        new_codes = body(r)["recovery_codes"]
        from chalicelib.identity.users import find_by_email
        user = find_by_email("new@example.com")
        assert not recovery_codes.use_recovery_code(user.id, codes[0])
        assert recovery_codes.use_recovery_code(user.id, new_codes[0])


def test_account_needs_a_session_and_csrf(stack: None) -> None:
    u = make_password_user()
    with Client(create_app("identity")) as c:
        assert c.http.get("/account").status_code == 401
        assert c.http.get("/account", headers={"Cookie": "aiplat_sid=forged"}).status_code == 401
        cookie = sign_in(c, u)
        r = c.http.post("/account/totp/setup", headers={"Cookie": cookie, "Content-Type": "application/json"}, body="{}")
        assert r.status_code == 403
        assert body(r)["code"] == "csrf_refused"
        r = call(c, "POST", "/account/api-tokens", cookie, {"name": "x"}, headers={"Origin": "http://127.0.0.1:9999"})
        assert r.status_code == 403
        r = call(c, "POST", "/account/api-tokens", cookie, {"name": "x"}, headers={"Origin": "http://127.0.0.1:8002"})
        assert r.status_code == 400  # past CSRF, now validation


def test_admin_mfa_reset_removes_factors_and_is_audited(stack: None) -> None:
    admin = make_tenant()
    u = make_password_user("lost@example.com")
    memberships(admin.region)(admin.workspace_id, u.user_id, role="member", email=u.email,
                              joined_at=clock.iso(), joined_via="seed").save()
    assert mfa.methods(u.user_id) == ["totp", "recovery_code"]
    with Client(create_app("platform")) as p:
        r = p.http.post(f"/v1/workspaces/{admin.workspace_id}/members/{u.user_id}/mfa/reset",
                        headers={**bearer(admin.token), "Content-Type": "application/json"}, body="{}")
        assert r.status_code == 200, r.body
        assert body(r)["removed_methods"] == ["totp", "recovery_code"]
    assert mfa.methods(u.user_id) == []
    assert recovery_codes.recovery_codes_left(u.user_id) == 0
    assert not recovery_codes.use_recovery_code(u.user_id, u.recovery_codes[0])
    [event] = [e for e in audit.iter_chain(admin.region, admin.workspace_id) if e["action"] == "member.mfa_reset"]
    assert event["actor"]["id"] == admin.user_id
    assert event["target"]["id"] == u.user_id
    # with no second factor left, the password alone does not sign in, and the answer is the one a
    # wrong password gets: a guessed password is not confirmed
    with Client(create_app("identity")) as c:
        right = post(c, "/signin/password", {"email": u.email, "password": PASSWORD})
        wrong = post(c, "/signin/password", {"email": u.email, "password": "not the password at all"})
        assert right.status_code == wrong.status_code == 401
        assert body(right) == {**body(wrong), "correlation_id": body(right)["correlation_id"]}


def test_calls_without_input_take_an_empty_json_body_and_refuse_fields(stack: None) -> None:
    """Deleting a session, an API token or a credential, and the option calls, take no input: the JSON
    content type (part of the CSRF guard) with no body or ``{}``; any field is a 400 and changes nothing."""
    u = make_password_user()
    with Client(create_app("identity")) as c:
        first = sign_in(c, u)
        clock.advance(31)
        second = sign_in(c, u)
        other = next(s for s in body(call(c, "GET", "/account/sessions", second))["sessions"] if not s["current"])
        r = call(c, "DELETE", f"/account/sessions/{other['id']}", second, {"x-extra": 1})
        assert r.status_code == 400
        assert body(r)["code"] == "validation_failed"
        assert r.headers["Content-Type"] == "application/problem+json"
        assert c.http.get("/account", headers={"Cookie": first}).status_code == 200  # nothing changed
        for path in ("/account/passkeys/options", "/account/security-keys/options", "/account/totp/setup"):
            assert call(c, "POST", path, second, ["not", "an", "object"]).status_code == 400, path
        r = c.http.request("DELETE", f"/account/sessions/{other['id']}", body=b"",
                           headers={"Cookie": second, "X-Requested-With": "test"})
        assert r.status_code == 403  # no JSON content type: refused by the CSRF guard
        assert call(c, "DELETE", f"/account/sessions/{other['id']}", second, {}).status_code == 200
        assert c.http.get("/account", headers={"Cookie": first}).status_code == 401
        r = c.http.post("/signout", headers={**JSON_HEADERS, "Cookie": second}, body=json.dumps({"all": True}))
        assert r.status_code == 400
        assert c.http.get("/account", headers={"Cookie": second}).status_code == 200  # still signed in
