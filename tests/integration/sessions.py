"""Signed-in browser sessions for integration tests, as a real browser gets them."""
from __future__ import annotations

import re
import time

import pyotp
import requests

from tests.integration.conftest import RunningPlatform

_used_totp: set[str] = set()


def fresh_totp(secret: str) -> str:
    """An authenticator code no test of this worker has used (the identity service refuses a replayed
    code): every sign-in of a worker's shared stack takes its codes here."""
    totp = pyotp.TOTP(secret)
    while (code := totp.now()) in _used_totp:
        time.sleep(1)
    _used_totp.add(code)
    return code


def email_code_session(platform: RunningPlatform, email: str) -> str:
    """A signed-in browser session of ``email`` (e-mail code sign-in, then TOTP for the demo user), as a Cookie
    header value. The code is read from the message's subject (its other fields hold random digit runs)."""
    identity = platform.urls["identity"]
    headers = {"Content-Type": "application/json", "X-Requested-With": "test"}
    before = len(platform.outbox_messages(email))
    r = requests.post(identity + "/signin/email-code", json={"email": email}, headers=headers, timeout=30)
    assert r.status_code == 202, r.text
    messages = platform.outbox_messages(email)
    assert len(messages) > before
    code = re.search(r"(\d{6,8})", messages[-1]["subject"]).group(1)  # type: ignore[union-attr]
    r = requests.post(identity + "/signin/email-code/verify", json={"email": email, "code": code},
                      headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    if r.json().get("mfa_required"):  # the demo user has TOTP: the code was the first factor
        totp = fresh_totp(platform.demo["totp_secret"])
        r = requests.post(identity + "/signin/mfa", json={"mfa_token": r.json()["mfa_token"], "code": totp},
                          headers=headers, timeout=30)
        assert r.status_code == 200, r.text
    assert r.cookies, "no session cookie"
    return "; ".join(f"{k}={v}" for k, v in r.cookies.items())
