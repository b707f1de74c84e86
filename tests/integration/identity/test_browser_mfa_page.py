"""A member of an MFA-enforced workspace without a second factor signs in to the web app with an e-mailed
code in a real browser (Chromium, CDP virtual authenticator): they land on the hosted page that says why
and what to do, not on an ``access_denied`` error; they add a passkey in security settings, sign in again
with it and reach the app."""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from chalicelib.webapp.shell import ensure_app_client
from tests.functional.conftest import make_tenant
from tests.integration.identity.test_browser_signin import (  # noqa: F401
    CHROMIUM,
    add_virtual_authenticator,
    read_code,
    stack_live,
)

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="run `make system-deps` (Debian chromium)")]


def test_email_code_into_an_mfa_workspace_shows_the_way_forward(stack_live: Any, browser: Any) -> None:  # noqa: F811
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    live, _ = stack_live
    auth, app = live.urls["identity"], live.urls["app"]
    ensure_app_client()
    tenant = make_tenant("mfa.newcomer@example.com", name="Strict Co", enforce_mfa=True)
    context = browser.new_context()
    page = context.new_page()
    add_virtual_authenticator(context, page)

    page.goto(app + "/")
    page.wait_for_url(re.compile(re.escape(auth) + r"/signin\?"))
    page.fill("#email", tenant.email)
    page.click("text=Continue")
    page.wait_for_selector("#step-methods", state="visible")
    sent_at = time.time()
    page.click("#method-code")
    page.wait_for_selector("#code", state="visible")
    page.fill("#code", read_code(live.outbox, tenant.email, sent_at))
    page.click("#code-form button[type=submit]")

    page.wait_for_url(re.compile(re.escape(auth) + r"/signin/mfa-required\?"))
    assert "error=" not in page.url
    expect(page.locator("#mfa-reason")).to_contain_text("“Strict Co” requires multi-factor authentication")
    again = page.get_attribute("#sign-in-again", "href")
    assert again and again.startswith("/oauth2/authorize?") and "prompt=login" in again

    page.click("#open-settings")  # the way forward: a second factor (here a passkey) in security settings
    page.wait_for_url(auth + "/account")
    page.click("#add-passkey")
    page.wait_for_selector("#passkeys li button")

    page.goto(auth + again)  # "Sign in again": a fresh sign-in, this time with the passkey
    back_in_app = re.compile(re.escape(app) + r"/")
    try:  # the sign-in page's conditional UI may offer (and the virtual authenticator use) the passkey at once
        page.wait_for_url(back_in_app, timeout=10_000)
    except PlaywrightTimeout:
        page.click("#passkey-button")
        page.wait_for_url(back_in_app)
    # the authorization request now accepted the sign-in for the MFA-enforced workspace
    page.wait_for_selector("body[data-ready=true]")
    assert page.text_content("#who") == tenant.email
    from chalicelib.identity.signin.sessions import list_sessions

    assert any("mfa" in s.amr for s in list_sessions(tenant.user_id))
    context.close()
