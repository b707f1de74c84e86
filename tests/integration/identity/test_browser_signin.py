"""A real browser (Playwright driving Debian's Chromium, with a CDP virtual authenticator) goes
through the hosted pages: signed-out app visit -> sign-up with an e-mailed code -> back on the app
page it started from -> passkey added in security settings -> sign out -> sign in with the passkey.
It also shows the SSO button replacing the password field for a verified SSO domain, and not for an
unverified one. Screenshots go to build/screenshots/."""
from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chalicelib.identity.signin.sessions import list_sessions
from chalicelib.identity.sso import connections as sso_config
from chalicelib.identity.users import find_by_email
from chalicelib.webapp.shell import ensure_app_client
from tests.functional.conftest import make_tenant
from tests.integration.conftest import CHROMIUM
from tests.integration.live_stack import LiveStack, live_stack
from tests.integration.sso_peers import VerificationFiles, node_available, start_oidc_provider

SHOTS = Path(__file__).resolve().parents[3] / "build" / "screenshots"
pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not os.path.exists(CHROMIUM) and not os.environ.get("CI"), reason="run `make system-deps` (Debian chromium)")]


@pytest.fixture(scope="module")
def stack_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveStack, VerificationFiles]]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    files = VerificationFiles()
    outbox = str(tmp_path_factory.mktemp("outbox"))
    yield from ((s, files) for s in live_stack(("identity", "platform", "app"), outbox,
                                               {"DOMAIN_VERIFICATION_URL": files.url_template}))
    files.stop()


def add_virtual_authenticator(context: Any, page: Any) -> Any:
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "transport": "internal", "hasResidentKey": True, "hasUserVerification": True,
        "isUserVerified": True, "automaticPresenceSimulation": True}})
    return cdp


def read_code(outbox: str, email: str, after: float) -> str:
    deadline = time.time() + 10
    while time.time() < deadline:
        for path in sorted(Path(outbox).glob("*.json")):
            msg = json.loads(path.read_text())
            if msg["to"] == email and path.stat().st_mtime >= after - 1:
                found = re.search(r"\b(\d{8})\b", msg["text"])
                if found:
                    return found.group(1)
        time.sleep(0.2)
    raise AssertionError("no sign-in code in the outbox")


def test_signup_by_code_passkey_signout_passkey_signin(stack_live: Any, browser: Any) -> None:
    live, _ = stack_live
    auth, app = live.urls["identity"], live.urls["app"]
    ensure_app_client()
    context = browser.new_context()
    page = context.new_page()
    add_virtual_authenticator(context, page)
    email = "newcomer@example.com"

    # a signed-out visitor of an app page is sent to the hosted sign-in page
    page.goto(app + "/workspaces/new?from=signin")
    page.wait_for_url(re.compile(re.escape(auth) + r"/signin\?"))
    assert page.get_attribute("#email", "autocomplete") == "username webauthn"
    page.fill("#email", email)
    page.click("text=Continue")
    page.wait_for_selector("#step-methods", state="visible")
    assert page.get_attribute("#password", "autocomplete") == "current-password"
    sent_at = time.time()
    page.click("#method-code")
    page.wait_for_selector("#code", state="visible")
    assert page.get_attribute("#code", "autocomplete") == "one-time-code"
    page.fill("#code", read_code(live.outbox, email, sent_at))
    page.click("#code-form button[type=submit]")

    # ... and returned to where they were, which shows who they are
    page.wait_for_url(app + "/workspaces/new?from=signin")
    page.wait_for_selector("body[data-ready=true]")
    assert page.text_content("#who") == email
    assert page.text_content("h1") == "Create a workspace"

    # add a passkey in the security settings (the session from the code sign-in is there)
    page.goto(auth + "/account")
    assert page.text_content("#account-email") == email
    page.click("#add-passkey")
    page.wait_for_selector("#passkeys li button")  # a listed passkey has a Remove button
    assert "Passkey" in page.text_content("#passkeys")
    page.screenshot(path=str(SHOTS / "account-with-passkey.png"), full_page=True)

    # sign out, then sign in with the passkey (no e-mail typed: discoverable credential)
    page.click("#signout")
    page.wait_for_url(re.compile(re.escape(auth) + r"/signin"))
    page.goto(auth + "/signin?conditional=off")
    page.click("#passkey-button")
    page.wait_for_url(auth + "/account")
    assert page.text_content("#account-email") == email
    user = find_by_email(email)
    assert user is not None
    # the e-mailed-code session ended at sign-out; what is left are passkey sessions (the sign-in page's
    # conditional UI may also have used the passkey from the autofill right after sign-out)
    amrs = [sorted(s.amr) for s in list_sessions(user.id)]
    assert amrs and all(a == ["hwk", "mfa", "user"] for a in amrs), amrs
    context.close()


def test_sso_button_replaces_password_only_for_verified_domain(stack_live: Any, browser: Any) -> None:
    live, files = stack_live
    auth = live.urls["identity"]
    tenant = make_tenant("it@verified.example", name="Verified Corp")
    verified = sso_config.create(workspace_id=tenant.workspace_id, created_by=tenant.user_id,
                                 kind="enterprise_directory", domain="verified.example",
                                 issuer="https://login.verified.example/tenant/v2.0", client_id="c",
                                 client_secret="s", display_name="Verified Corp Entra ID")
    files.files["verified.example"] = sso_config.VERIFICATION_PREFIX + verified.verification_token
    assert sso_config.verify_domain(verified)
    sso_config.create(workspace_id=tenant.workspace_id, created_by=tenant.user_id, kind="identity_platform",
                      domain="unverified.example", issuer="https://unverified.okta.example", client_id="c",
                      client_secret="s", display_name="Unverified Okta")

    context = browser.new_context()
    page = context.new_page()
    page.goto(auth + "/signin?conditional=off")
    page.fill("#email", "someone@verified.example")
    page.click("text=Continue")
    button = page.wait_for_selector("#sso-button", state="visible")
    assert button.text_content() == "Continue with Verified Corp Entra ID"
    assert "/sso/start?" in button.get_attribute("href")
    assert page.locator("#password").count() == 0  # replaced, not merely hidden
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "signin-sso-button.png"), full_page=True)

    page.goto(auth + "/signin?conditional=off")
    page.fill("#email", "someone@unverified.example")
    page.click("text=Continue")
    page.wait_for_selector("#password", state="visible")
    assert not page.locator("#sso-button").is_visible()
    page.screenshot(path=str(SHOTS / "signin-methods.png"), full_page=True)
    context.close()


def test_password_then_security_key_as_second_factor(stack_live: Any, browser: Any) -> None:
    from chalicelib.identity.signin import password_hashing as passwords
    from chalicelib.identity.signin import password_signin as signin
    from chalicelib.identity.signin import sessions
    from chalicelib.identity.users import create_user

    live, _ = stack_live
    auth = live.urls["identity"]
    user = create_user("keyholder@example.com", email_verified=True)
    signin.set_password_hash(user.id, passwords.hash_password("correct horse battery staple"))
    sid, _ = sessions.create_session(user.id, ["email"], caller=None)

    context = browser.new_context()
    page = context.new_page()
    add_virtual_authenticator(context, page)
    context.add_cookies([{"name": sessions.COOKIE_NAME, "value": sid, "url": auth}])
    page.goto(auth + "/account")
    page.click("#add-security-key")
    page.wait_for_selector("#security-keys li button")
    context.clear_cookies()

    page.goto(auth + "/signin?conditional=off")
    page.fill("#email", "keyholder@example.com")
    page.click("text=Continue")
    page.fill("#password", "correct horse battery staple")
    page.click("#password-form button[type=submit]")
    page.wait_for_selector("#step-mfa", state="visible")
    assert page.get_attribute("#mfa-code", "autocomplete") == "one-time-code"
    page.click("#mfa-key")
    page.wait_for_url(auth + "/account")
    newest = max(list_sessions(user.id), key=lambda s: s.created_at)
    assert sorted(newest.amr) == ["hwk", "mfa", "pwd"]
    context.close()


def test_settings_page_sets_up_totp_and_creates_an_api_token(stack_live: Any, browser: Any) -> None:
    import pyotp

    from chalicelib.identity.mfa import totp
    from chalicelib.identity.signin import sessions

    live, _ = stack_live
    auth = live.urls["identity"]
    tenant = make_tenant("settings@example.com", name="Settings Co")
    sid, _ = sessions.create_session(tenant.user_id, ["email"], caller=None)
    context = browser.new_context()
    page = context.new_page()
    context.add_cookies([{"name": sessions.COOKIE_NAME, "value": sid, "url": auth}])
    page.goto(auth + "/account")
    page.click("#totp-start")
    secret = page.wait_for_selector("#totp-secret").text_content()
    page.fill("#totp-code", "000000" if pyotp.TOTP(secret).now() != "000000" else "111111")
    page.click("#totp-form button[type=submit]")
    page.wait_for_selector("#totp-code-error", state="visible")  # a wrong code is refused, in the field
    assert page.get_attribute("#totp-code", "aria-invalid") == "true"
    page.fill("#totp-code", pyotp.TOTP(secret).now())
    page.click("#totp-form button[type=submit]")
    page.wait_for_selector("#recovery-codes li")
    assert page.locator("#recovery-codes li").count() == 10
    assert totp.has_totp(tenant.user_id)

    page.fill("#token-name", "ci")
    page.select_option("#token-workspace", tenant.workspace_id)
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("#token-created", state="visible")
    assert page.input_value("#token-value").count(".") == 2  # a JWT
    page.wait_for_selector("#api-tokens li button")
    page.screenshot(path=str(SHOTS / "account-totp-token.png"), full_page=True)
    context.close()


@pytest.mark.skipif(not node_available() and not os.environ.get("CI"), reason="run `make system-deps` (npm ci of the oidc-provider peer)")
def test_sso_button_signs_in_through_a_real_provider(stack_live: Any, browser: Any) -> None:
    live, files = stack_live
    auth = live.urls["identity"]
    tenant = make_tenant("it@sso-browser.example", name="SSO Browser Co")
    provider = start_oidc_provider(auth + "/sso/callback", {"sub": "bob-1", "email": "bob@sso-browser.example",
                                                            "email_verified": True})
    try:
        conn = sso_config.create(workspace_id=tenant.workspace_id, created_by=tenant.user_id,
                                 kind="open_source_identity_server", domain="sso-browser.example",
                                 issuer=provider.issuer, client_id=provider.client_id,
                                 client_secret=provider.client_secret, display_name="Bob's Keycloak")
        files.files["sso-browser.example"] = sso_config.VERIFICATION_PREFIX + conn.verification_token
        assert sso_config.verify_domain(conn)
        context = browser.new_context()
        page = context.new_page()
        page.goto(auth + "/signin?conditional=off")
        page.fill("#email", "bob@sso-browser.example")
        page.click("text=Continue")
        page.click("text=Continue with Bob's Keycloak")
        page.wait_for_url(auth + "/account")
        assert page.text_content("#account-email") == "bob@sso-browser.example"
        user = find_by_email("bob@sso-browser.example")
        assert user is not None and user.idp == provider.issuer and user.password_hash is None
        context.close()
    finally:
        provider.stop()


def test_reset_pages_request_link_and_set_new_password_once(stack_live: Any, browser: Any) -> None:
    from chalicelib.identity.signin import password_hashing as passwords
    from chalicelib.identity.signin import password_signin as signin
    from chalicelib.identity.users import create_user, get_user

    live, _ = stack_live
    auth = live.urls["identity"]
    user = create_user("forgetful@example.com", email_verified=True)
    signin.set_password_hash(user.id, passwords.hash_password("an old password 123"))
    context = browser.new_context()
    page = context.new_page()
    page.goto(auth + "/signin/reset")
    assert page.get_attribute("#email", "autocomplete") == "email"
    sent_at = time.time()
    page.fill("#email", "forgetful@example.com")
    page.click("#reset-form button[type=submit]")
    page.wait_for_selector("#reset-done", state="visible")
    link = None
    deadline = time.time() + 10
    while link is None and time.time() < deadline:
        for path in sorted(Path(live.outbox).glob("*.json")):
            msg = json.loads(path.read_text())
            if msg["to"] == "forgetful@example.com" and path.stat().st_mtime >= sent_at - 1:
                found = re.search(r"(http\S+/reset\?token=\S+)", msg["text"])
                link = found.group(1) if found else None
        time.sleep(0.2)
    assert link and link.startswith(auth + "/reset?token=")
    before = get_user(user.id).password_hash
    page.goto(link)
    assert page.get_attribute("#new-password", "autocomplete") == "new-password"
    page.fill("#new-password", "a brand new password 456")
    page.click("#reset-form button[type=submit]")
    page.wait_for_selector("#reset-done", state="visible")
    assert get_user(user.id).password_hash != before
    page.goto(link)  # the link works once
    page.fill("#new-password", "yet another password 789")
    page.click("#reset-form button[type=submit]")
    page.wait_for_selector("#new-password-error", state="visible")
    assert page.get_attribute("#new-password", "aria-invalid") == "true"
    context.close()
