"""The consent page in Chromium: a self-registered client's authorization link opens the sign-in page, which
names the client and where the browser goes next; after signing in the user sees the consent page (no
accessibility violation, no CSP refusal, not frameable), allows the client, and later revokes it in the
security settings, after which its refresh token is refused."""
from __future__ import annotations

import base64
import hashlib
import re
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests

from tests.integration.conftest import RunningPlatform
from tests.integration.sessions import mfa_member
from tests.integration.webapp.browser import CHROMIUM, SHOTS, axe_violations, csp_watch, sign_in_with_password_and_totp

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="run `make system-deps` (Debian chromium)")]
ATTACKER = "https://attacker.example/cb"


def test_consent_page_allow_then_revoke_in_settings(platform: RunningPlatform, browser: Any) -> None:
    from playwright.sync_api import expect

    auth = platform.urls["identity"]
    user = mfa_member(platform)
    client = requests.post(auth + "/oauth2/register", timeout=30, json={
        "redirect_uris": [ATTACKER], "token_endpoint_auth_method": "none", "client_name": "Calendar Helper",
        "grant_types": ["authorization_code", "refresh_token"]}).json()
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    context = browser.new_context()
    reached: list[str] = []
    context.route("https://attacker.example/**", lambda route: (reached.append(route.request.url),
                                                                route.fulfill(status=200, body="ok")))
    page = context.new_page()
    refused = csp_watch(page)

    page.goto(auth + "/oauth2/authorize?" + urlencode({
        "response_type": "code", "client_id": client["client_id"], "redirect_uri": ATTACKER, "state": "st",
        "scope": "openid email", "code_challenge": challenge, "code_challenge_method": "S256"}))
    page.wait_for_url(re.compile(re.escape(auth) + r"/signin\?"))
    expect(page.locator("#signin-client")).to_contain_text("Calendar Helper")
    expect(page.locator("#signin-next-host")).to_have_text("attacker.example")
    sign_in_with_password_and_totp(page, auth, user["email"], user["password"], user["totp_secret"])

    page.wait_for_url(re.compile(re.escape(auth) + r"/oauth2/consent\?"))
    assert not reached  # no code left the identity service before the user answered
    expect(page.locator("#client-name")).to_have_text("Calendar Helper")
    expect(page.locator("#name-origin")).to_contain_text("not verified")
    expect(page.locator("#redirect-host")).to_have_text("attacker.example")
    expect(page.locator("#role")).to_have_text("admin")
    expect(page.locator("#abilities")).to_contain_text("See your e-mail address")
    assert not axe_violations(page)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "consent.png"), full_page=True)

    page.click("#allow")
    page.wait_for_url(re.compile(re.escape(ATTACKER)))
    answer = {k: v[0] for k, v in parse_qs(urlsplit(reached[-1]).query).items()}
    assert answer["state"] == "st" and answer["code"].startswith("ac_")
    tokens = requests.post(auth + "/oauth2/token", timeout=30, data={
        "grant_type": "authorization_code", "code": answer["code"], "redirect_uri": ATTACKER,
        "client_id": client["client_id"], "code_verifier": verifier}).json()
    assert tokens["refresh_token"].startswith("rt_")

    page.goto(auth + "/account")
    apps = page.locator("#connected-apps li")
    expect(apps).to_contain_text("Calendar Helper")
    expect(apps).to_contain_text("sends you to attacker.example")
    page.click("#connected-apps li button")
    expect(page.locator("#connected-apps")).to_contain_text("No connected apps.")
    r = requests.post(auth + "/oauth2/token", timeout=30, data={
        "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": client["client_id"]})
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    assert not refused, refused
    context.close()
