"""The password rule in a real browser (Chromium): the reset page shows the rule's text under the field,
refuses a short password before sending it, and shows the server's reason for a common one without
spending the link; the settings page shows the same text on its password form."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from chalicelib.identity.signin.password_policy import MIN_LENGTH, RULE_TEXT
from tests.integration.identity.test_browser_signin import CHROMIUM, stack_live  # noqa: F401

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="run `make system-deps` (Debian chromium)")]


def _reset_link(outbox: str, email: str, after: float) -> str:
    deadline = time.time() + 10
    while time.time() < deadline:
        for path in sorted(Path(outbox).glob("*.json")):
            msg = json.loads(path.read_text())
            if msg["to"] == email and path.stat().st_mtime >= after - 1:
                found = re.search(r"(http\S+/reset\?token=\S+)", msg["text"])
                if found:
                    return found.group(1)
        time.sleep(0.2)
    raise AssertionError("no reset link in the outbox")


def test_reset_and_settings_pages_show_and_apply_the_one_rule(stack_live: Any, browser: Any) -> None:  # noqa: F811
    from playwright.sync_api import expect

    from chalicelib.identity.signin import password_hashing as passwords
    from chalicelib.identity.signin import password_signin as signin
    from chalicelib.identity.signin import sessions
    from chalicelib.identity.users import create_user, get_user

    live, _ = stack_live
    auth = live.urls["identity"]
    user = create_user("rule.reader@example.com", email_verified=True)
    signin.set_password_hash(user.id, passwords.hash_password("an old password 123"))
    context = browser.new_context()
    page = context.new_page()
    page.goto(auth + "/signin/reset")
    sent_at = time.time()
    page.fill("#email", user.email)
    page.click("#reset-form button[type=submit]")
    page.wait_for_selector("#reset-done", state="visible")
    page.goto(_reset_link(live.outbox, user.email, sent_at))
    assert page.text_content("#new-password-hint") == RULE_TEXT
    assert page.get_attribute("#new-password", "minlength") == str(MIN_LENGTH)
    before = get_user(user.id).password_hash
    page.fill("#new-password", "short one")
    page.click("#reset-form button[type=submit]")
    page.wait_for_selector("#new-password-error", state="visible")
    assert page.text_content("#new-password-error") == RULE_TEXT  # refused in the page, nothing sent
    page.fill("#new-password", "qwerty123456")
    page.click("#reset-form button[type=submit]")
    expect(page.locator("#new-password-error")).to_contain_text("too common")  # the server's reason
    assert get_user(user.id).password_hash == before
    page.fill("#new-password", "four unrelated words here")
    page.click("#reset-form button[type=submit]")
    page.wait_for_selector("#reset-done", state="visible")  # the refused attempts did not spend the link
    assert get_user(user.id).password_hash != before

    sid, _ = sessions.create_session(user.id, ["email"], caller=None)
    context.add_cookies([{"name": sessions.COOKIE_NAME, "value": sid, "url": auth}])
    page.goto(auth + "/account")
    assert page.text_content("#new-password-hint") == RULE_TEXT
    expect(page.locator("#password-state")).to_contain_text("You have a password")
    page.fill("#current-password", "four unrelated words here")
    page.fill("#new-password", "rule.reader forever and ever")
    page.click("#password-form button[type=submit]")
    expect(page.locator("#new-password-error")).to_contain_text("e-mail name")
    context.close()
