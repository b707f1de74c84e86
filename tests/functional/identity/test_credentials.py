"""Reset links, TOTP replay, recovery codes, e-mailed codes, and no account enumeration."""
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from chalice.test import Client

from chalicelib.core import clock
from chalicelib.core.store.tables import global_model
from chalicelib.groups import create_app
from chalicelib.identity import users
from chalicelib.identity.mfa import recovery_codes, totp
from chalicelib.identity.models import ResetAttrs
from chalicelib.identity.opaque import digest
from tests.functional.identity.helpers import PASSWORD, body, cookie_of, make_password_user, post

SAME_CORRELATION = {"X-Correlation-Id": "enum-check-0001"}


def _reset_token(outbox: Any, email: str) -> str:
    return parse_qs(urlsplit(outbox.last_link(email)).query)["token"][0]


def test_reset_link_is_single_use_expires_and_is_stored_hashed(outbox: Any) -> None:
    u = make_password_user()
    with Client(create_app("identity")) as c:
        assert post(c, "/signin/reset", {"email": u.email}).status_code == 202
        token = _reset_token(outbox, u.email)
        stored = [i for i in global_model(ResetAttrs).scan() if i.pk.startswith("reset#")]
        assert len(stored) == 1
        assert stored[0].pk == f"reset#{digest(token)}"
        assert token not in stored[0].pk
        r = post(c, "/signin/reset/confirm", {"token": token, "new_password": "a brand new passphrase"})
        assert r.status_code == 200, r.body
        r = post(c, "/signin/reset/confirm", {"token": token, "new_password": "another new passphrase"})
        assert r.status_code == 400
        assert body(r)["code"] == "invalid_reset_token"
        # the new password works (and still asks for the second factor); the old one does not
        assert post(c, "/signin/password", {"email": u.email, "password": "a brand new passphrase"}).status_code == 200
        assert post(c, "/signin/password", {"email": u.email, "password": PASSWORD}).status_code == 401
        # a link used after 30 minutes is refused
        assert post(c, "/signin/reset", {"email": u.email}).status_code == 202
        late = _reset_token(outbox, u.email)
        clock.advance(30 * 60 + 1)
        r = post(c, "/signin/reset/confirm", {"token": late, "new_password": "too late passphrase"})
        assert r.status_code == 400
        assert body(r)["code"] == "invalid_reset_token"
        assert post(c, "/signin/password", {"email": u.email, "password": "too late passphrase"}).status_code == 401


def test_reset_signs_out_sessions_and_weak_password_changes_nothing(outbox: Any) -> None:
    u = make_password_user()
    with Client(create_app("identity")) as c:
        r = post(c, "/signin/password", {"email": u.email, "password": PASSWORD})
        r = post(c, "/signin/mfa", {"mfa_token": body(r)["mfa_token"], "code": u.totp_now()})
        cookie = cookie_of(r)
        assert c.http.get("/account", headers={"Cookie": cookie}).status_code == 200
        post(c, "/signin/reset", {"email": u.email})
        token = _reset_token(outbox, u.email)
        r = post(c, "/signin/reset/confirm", {"token": token, "new_password": "short"})
        assert r.status_code == 400
        assert body(r)["errors"][0]["field"] == "new_password"
        r = post(c, "/signin/reset/confirm", {"token": token, "new_password": "long enough passphrase"})
        assert r.status_code == 200  # the weak attempt did not consume the link
        assert c.http.get("/account", headers={"Cookie": cookie}).status_code == 401


def test_sso_users_are_told_to_reset_at_their_provider(outbox: Any) -> None:
    users.create_user("sso@corp.example", email_verified=True, idp="https://idp.corp.example")
    with Client(create_app("identity")) as c:
        assert post(c, "/signin/reset", {"email": "sso@corp.example"}).status_code == 202
    [msg] = outbox.messages("sso@corp.example")
    assert msg["tag"] == "reset-sso"
    assert "idp.corp.example" in msg["text"]
    assert "http" in msg["text"]
    assert "token=" not in msg["text"]


def test_no_enumeration_on_sign_in_reset_and_code_requests(outbox: Any) -> None:
    u = make_password_user("known@example.com")
    users.create_user("sso-user@corp.example", idp="https://idp.corp.example")
    with Client(create_app("identity")) as c:
        def same(path: str, payload_for: Any) -> None:
            answers = set()
            for address in (u.email, "nobody@example.com", "sso-user@corp.example"):
                r = post(c, path, payload_for(address), SAME_CORRELATION)
                answers.add((r.status_code, r.body))
            assert len(answers) == 1, (path, answers)

        same("/signin/password", lambda a: {"email": a, "password": "wrong password"})
        same("/signin/reset", lambda a: {"email": a})
        same("/signin/email-code", lambda a: {"email": a})
        # a locked account answers exactly like a wrong password
        for i in range(10):
            post(c, "/signin/password", {"email": u.email, "password": f"bad {i}"})
        locked = post(c, "/signin/password", {"email": u.email, "password": PASSWORD}, SAME_CORRELATION)
        unknown = post(c, "/signin/password", {"email": "nobody@example.com", "password": PASSWORD}, SAME_CORRELATION)
        assert (locked.status_code, locked.body) == (unknown.status_code, unknown.body) == (locked.status_code, locked.body)
        assert locked.status_code == 401
        assert body(locked)["code"] == "invalid_credentials"


def test_totp_code_cannot_be_replayed(stack: None) -> None:
    u = make_password_user()
    code = u.totp_now()
    assert totp.verify_totp(u.user_id, code) is True
    assert totp.verify_totp(u.user_id, code) is False  # same code, same step
    assert totp.verify_totp(u.user_id, u.totp_now(-1)) is False  # an older step after a newer one
    assert totp.verify_totp(u.user_id, "12345") is False
    assert totp.verify_totp(u.user_id, "abcdef") is False
    clock.advance(30)
    assert totp.verify_totp(u.user_id, u.totp_now()) is True
    clock.advance(3 * 30)
    assert totp.verify_totp(u.user_id, code) is False  # outside the one-step drift window


def test_replayed_totp_refused_in_the_sign_in_flow(stack: None) -> None:
    u = make_password_user()
    with Client(create_app("identity")) as c:
        code = u.totp_now()
        r = post(c, "/signin/password", {"email": u.email, "password": PASSWORD})
        assert post(c, "/signin/mfa", {"mfa_token": body(r)["mfa_token"], "code": code}).status_code == 200
        r = post(c, "/signin/password", {"email": u.email, "password": PASSWORD})
        r = post(c, "/signin/mfa", {"mfa_token": body(r)["mfa_token"], "code": code})
        assert r.status_code == 401
        assert body(r)["code"] == "code_already_used"  # said plainly, not a lockout strike


def test_each_recovery_code_works_once_and_codes_are_hashed(stack: None) -> None:
    u = make_password_user()
    assert len(u.recovery_codes) == 10
    assert len(set(u.recovery_codes)) == 10
    from chalicelib.identity.models import RecoveryCodesAttrs
    stored = global_model(RecoveryCodesAttrs).get(f"rc#{u.user_id}")
    assert not set(u.recovery_codes) & set(stored.codes)
    with Client(create_app("identity")) as c:
        for code in u.recovery_codes[:2]:
            r = post(c, "/signin/password", {"email": u.email, "password": PASSWORD})
            r = post(c, "/signin/mfa", {"mfa_token": body(r)["mfa_token"], "code": code.upper()})
            assert r.status_code == 200, r.body
            assert body(r)["amr"] == ["mfa", "otp", "pwd"]
            r = post(c, "/signin/password", {"email": u.email, "password": PASSWORD})
            r = post(c, "/signin/mfa", {"mfa_token": body(r)["mfa_token"], "code": code})
            assert r.status_code == 401
    assert recovery_codes.recovery_codes_left(u.user_id) == 8


def test_email_code_signs_up_just_in_time_once(outbox: Any) -> None:
    with Client(create_app("identity")) as c:
        assert post(c, "/signin/email-code", {"email": "New.Person@Example.com"}).status_code == 202
        assert users.find_by_email("new.person@example.com") is None  # nothing created before the proof
        code = outbox.last_code("new.person@example.com")
        r = post(c, "/signin/email-code/verify", {"email": "new.person@example.com", "code": "00000000"
                                                  if code != "00000000" else "11111111"})
        assert r.status_code == 401
        assert body(r)["code"] == "invalid_code"
        r = post(c, "/signin/email-code/verify", {"email": "new.person@example.com", "code": code})
        assert r.status_code == 200, r.body
        assert body(r)["amr"] == ["email"]
        assert "aiplat_sid=" in r.headers["Set-Cookie"]
        user = users.find_by_email("new.person@example.com")
        assert user is not None
        assert user.email_verified
        r = post(c, "/signin/email-code/verify", {"email": "new.person@example.com", "code": code})
        assert r.status_code == 401  # single use


def test_email_code_attempts_and_ttl_are_limited(outbox: Any) -> None:
    with Client(create_app("identity")) as c:
        post(c, "/signin/email-code", {"email": "a@example.com"})
        code = outbox.last_code("a@example.com")
        wrong = "12345678" if code != "12345678" else "87654321"
        for _ in range(5):
            assert post(c, "/signin/email-code/verify", {"email": "a@example.com", "code": wrong}).status_code == 401
        assert post(c, "/signin/email-code/verify", {"email": "a@example.com", "code": code}).status_code == 401
        post(c, "/signin/email-code", {"email": "a@example.com"})
        code = outbox.last_code("a@example.com")
        clock.advance(10 * 60 + 1)
        assert post(c, "/signin/email-code/verify", {"email": "a@example.com", "code": code}).status_code == 401


def test_email_code_for_a_user_with_mfa_asks_for_the_second_factor(outbox: Any) -> None:
    u = make_password_user()
    with Client(create_app("identity")) as c:
        post(c, "/signin/email-code", {"email": u.email})
        r = post(c, "/signin/email-code/verify", {"email": u.email, "code": outbox.last_code(u.email)})
        assert r.status_code == 200
        assert body(r)["mfa_required"] is True
        assert "Set-Cookie" not in r.headers
        r = post(c, "/signin/mfa", {"mfa_token": body(r)["mfa_token"], "code": u.totp_now()})
        assert r.status_code == 200
        assert body(r)["amr"] == ["email", "mfa", "otp"]


def test_bad_input_on_sign_in_routes_is_a_problem_and_changes_nothing(outbox: Any) -> None:
    with Client(create_app("identity")) as c:
        cases = [
            ("/signin/password", {"email": "not-an-email", "password": "x"}),
            ("/signin/password", {"email": "a@example.com"}),
            ("/signin/password", {"email": "a@example.com", "password": "x", "extra": 1}),
            ("/signin/password", {"email": "a@example.com", "password": 5}),
            ("/signin/mfa", {"mfa_token": "x"}),
            ("/signin/email-code", {"email": ["a@example.com"]}),
            ("/signin/email-code/verify", {"email": "a@example.com"}),
            ("/signin/reset", {}),
            ("/signin/reset/confirm", {"token": "t"}),
            ("/signin/password", "[1, 2]"),
            ("/signin/password", "{not json"),
        ]
        for path, payload in cases:
            r = post(c, path, payload)
            assert 400 <= r.status_code < 500, (path, payload, r.status_code)
            assert r.headers["Content-Type"] == "application/problem+json"
            assert body(r)["code"] in ("validation_failed", "malformed_json", "invalid_body")
        assert outbox.messages() == []
        assert users.find_by_email("a@example.com") is None
        r = c.http.post("/signin/password", headers={"Content-Type": "text/plain", "X-Requested-With": "t"},
                        body=json.dumps({"email": "a@example.com", "password": "x"}))
        assert r.status_code == 415
        assert r.headers["Content-Type"] == "application/problem+json"
