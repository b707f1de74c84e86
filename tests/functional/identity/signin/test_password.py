import json

from chalice.test import Client

from chalicelib.core import clock
from chalicelib.groups import create_app
from chalicelib.identity.signin import sessions
from tests.functional.identity.helpers import body, cookie_of, make_password_user, post


def test_password_then_totp_signs_in_with_pwd_otp_mfa(stack: None) -> None:
    u = make_password_user()
    with Client(create_app("identity")) as c:
        r = post(c, "/signin/password", {"email": u.email, "password": u.password, "return_to": "/account/x"})
        assert r.status_code == 200, r.body
        challenge = body(r)
        assert challenge["mfa_required"] is True
        assert "totp" in challenge["methods"]
        assert "recovery_code" in challenge["methods"]
        assert "Set-Cookie" not in r.headers
        r = post(c, "/signin/mfa", {"mfa_token": challenge["mfa_token"], "code": u.totp_now()})
        assert r.status_code == 200, r.body
        assert body(r)["redirect_to"].endswith("/account/x")
        assert body(r)["amr"] == ["mfa", "otp", "pwd"]
        cookie = r.headers["Set-Cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=Lax" in cookie
        assert "Path=/" in cookie
        sid = cookie_of(r).split("=", 1)[1]
        record = sessions.get_by_sid(sid)
        assert record is not None
        assert record.user_id == u.user_id
        assert record.sid_hash != sid  # only the digest is stored
        # the mfa_token is single use
        r = post(c, "/signin/mfa", {"mfa_token": challenge["mfa_token"], "code": u.totp_now(1)})
        assert r.status_code == 401
        assert body(r)["code"] == "invalid_mfa_token"


def test_session_expires_after_its_lifetime(stack: None) -> None:
    u = make_password_user()
    sid, record = sessions.create_session(u.user_id, ["pwd", "otp", "mfa"], caller=None)
    assert sessions.get_by_sid(sid) is not None
    clock.advance(sessions.SESSION_TTL_SECONDS + 1)
    assert sessions.get_by_sid(sid) is None


def test_csrf_refused_without_json_or_with_foreign_origin(stack: None) -> None:
    u = make_password_user()
    with Client(create_app("identity")) as c:
        payload = json.dumps({"email": u.email, "password": u.password})
        r = c.http.post("/signin/password", headers={"Content-Type": "application/json", "Origin": "https://evil.example"},
                        body=payload)
        assert r.status_code == 403
        assert body(r)["code"] == "csrf_refused"
        r = c.http.post("/signin/password", headers={"Content-Type": "application/json"}, body=payload)
        assert r.status_code == 403
        assert body(r)["code"] == "csrf_refused"
        r = c.http.post("/signin/password", headers={"Content-Type": "application/json",
                                                     "Origin": "http://127.0.0.1:8002"}, body=payload)
        assert r.status_code == 200, r.body


def test_open_redirect_refused(stack: None) -> None:
    u = make_password_user()
    with Client(create_app("identity")) as c:
        for bad in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"):
            r = post(c, "/signin/password", {"email": u.email, "password": u.password, "return_to": bad})
            assert r.status_code == 400, bad
            assert body(r)["errors"][0]["field"] == "return_to"
