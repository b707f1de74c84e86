"""The security settings page's set-up aids: the authenticator key as a QR code (segno, paths only) and an
otpauth:// link, a way back to the app; the sign-in page tells a new address how to sign up."""
from html.parser import HTMLParser
from typing import Any

import segno
from chalice.test import Client

from chalicelib.core.config import settings
from chalicelib.groups import create_app
from tests.functional.identity.account.test_routes import call, email_sign_in
from tests.functional.identity.helpers import body


def _elements(html: str) -> list[tuple[str, dict[str, str]]]:
    found: list[tuple[str, dict[str, str]]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, {k: v or "" for k, v in attrs}))

    Collect().feed(html)
    return found


def test_totp_setup_gives_a_qr_code_of_the_otpauth_uri(outbox: Any) -> None:
    with Client(create_app("identity")) as c:
        cookie = email_sign_in(c, outbox, "qr@example.com")
        r = call(c, "POST", "/account/totp/setup", cookie, {})
        assert r.status_code == 200, r.body
        got = body(r)
    assert got["otpauth_uri"].startswith("otpauth://totp/") and got["secret"] in got["otpauth_uri"]
    expected = segno.make(got["otpauth_uri"], error="m")
    assert got["qr_svg"] == expected.svg_inline(scale=4, border=4, dark="#000", light="#fff", title="QR code to scan")
    elements = _elements(got["qr_svg"])
    assert {tag for tag, _ in elements} <= {"svg", "title", "g", "path"}
    assert all(not k.startswith("on") and k not in ("style", "href") for _, attrs in elements for k in attrs)


def test_account_page_links_back_to_the_app_and_holds_the_qr_place(outbox: Any) -> None:
    with Client(create_app("identity")) as c:
        cookie = email_sign_in(c, outbox, "back@example.com")
        r = c.http.get("/account", headers={"Cookie": cookie, "Accept": "text/html"})
    assert r.status_code == 200
    page = r.body.decode()
    links = {a.get("id"): a.get("href") for tag, a in _elements(page) if tag == "a"}
    assert links["back-to-app"] == settings().app_url.rstrip("/") + "/"
    assert 'id="totp-qr"' in page and 'id="totp-link"' in page


def test_sign_in_page_offers_sign_up_to_a_new_address(stack: None) -> None:
    with Client(create_app("identity")) as c:
        page = c.http.get("/signin", headers={"Accept": "text/html"}).body.decode()
    assert "New here?" in page and "creates your account" in page
