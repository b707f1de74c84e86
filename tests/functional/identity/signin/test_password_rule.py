"""One password rule on every surface that sets a password: the account API, the reset API, and the
reset and security-settings pages that show its text (``chalicelib/identity/signin/password_policy.py``)."""
import html
from typing import Any
from urllib.parse import parse_qs, urlsplit

from chalice.test import Client

from chalicelib.groups import create_app
from chalicelib.identity.signin.password_policy import MAX_LENGTH, MIN_LENGTH, RULE_TEXT
from tests.functional.identity.account.test_routes import call, sign_in
from tests.functional.identity.helpers import PASSWORD, body, make_password_user, post

TOO_SHORT = "x1" * ((MIN_LENGTH - 1) // 2)
COMMON = "qwerty123456"


def _reset_token(c: Any, outbox: Any, email: str) -> str:
    assert post(c, "/signin/reset", {"email": email}).status_code == 202
    return parse_qs(urlsplit(outbox.last_link(email)).query)["token"][0]


def _field_message(r: Any) -> str:
    assert r.status_code == 400, r.body
    assert body(r)["code"] == "validation_failed", r.body
    return next(e["message"] for e in body(r)["errors"] if e["field"] == "new_password")


def test_account_api_applies_the_rule_and_changes_nothing_when_refused(stack: None) -> None:
    u = make_password_user("rule.keeper@example.com")
    with Client(create_app("identity")) as c:
        cookie = sign_in(c, u)
        for weak, why in ((TOO_SHORT, f"at least {MIN_LENGTH}"), ("y" * (MAX_LENGTH + 1), f"at most {MAX_LENGTH}"),
                          (COMMON, "too common"), ("rule.keeper is my secret", "e-mail name")):
            r = call(c, "POST", "/account/password", cookie, {"current_password": PASSWORD, "new_password": weak})
            assert why in _field_message(r)
        assert post(c, "/signin/password", {"email": u.email, "password": PASSWORD}).status_code == 200
        r = call(c, "POST", "/account/password", cookie, {"current_password": PASSWORD, "new_password": "twelve chars"})
        assert r.status_code == 200, r.body  # exactly the minimum, no composition rule


def test_reset_api_applies_the_rule_before_spending_the_link(outbox: Any) -> None:
    u = make_password_user("forgot.again@example.com")
    with Client(create_app("identity")) as c:
        token = _reset_token(c, outbox, u.email)
        assert "at least" in _field_message(post(c, "/signin/reset/confirm", {"token": token, "new_password": TOO_SHORT}))
        assert "too common" in _field_message(post(c, "/signin/reset/confirm", {"token": token, "new_password": COMMON}))
        r = post(c, "/signin/reset/confirm", {"token": token, "new_password": "forgot.again and again"})
        assert "e-mail name" in _field_message(r)
        r = post(c, "/signin/reset/confirm", {"token": token, "new_password": "a fine new passphrase"})
        assert r.status_code == 200, r.body  # the refused attempts did not use the link up


def test_every_page_that_sets_a_password_shows_the_rule(outbox: Any) -> None:
    u = make_password_user("pages@example.com")
    shown = html.escape(RULE_TEXT)
    with Client(create_app("identity")) as c:
        token = _reset_token(c, outbox, u.email)
        reset = c.http.get(f"/reset?token={token}", headers={"Accept": "text/html"}).body.decode()
        cookie = sign_in(c, u)
        account = c.http.get("/account", headers={"Accept": "text/html", "Cookie": cookie}).body.decode()
    for page in (reset, account):
        assert shown in page
        assert f'minlength="{MIN_LENGTH}"' in page
        assert f'maxlength="{MAX_LENGTH}"' in page
        assert 'autocomplete="new-password"' in page
