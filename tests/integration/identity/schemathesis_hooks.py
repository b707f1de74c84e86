"""Schemathesis hooks of ``test_schemathesis.py``: a browser session for the cookie-authenticated paths.

Loaded by the Schemathesis process (``SCHEMATHESIS_HOOKS`` names this file). The auth provider signs the
stack's demo user in once, the way the sign-in page does (``POST /signin/password``, then
``POST /signin/mfa`` with the current TOTP code), and sends its ``aiplat_sid`` cookie on the operations
under ``/account``. ``IDENTITY_FUZZ_RUN_JSON`` is the stack's ``run.json`` (its identity URL and the demo
user's generated password and TOTP secret). ``POST /signout`` gets no real cookie (its session is
optional), so the fuzzer never ends the session it runs on.

The fuzzer may end that session itself (``DELETE /account/sessions/{session_id}`` with an id that
``GET /account/sessions`` listed): the next call answers 401, and Schemathesis signs in again and
replays it (its reactive re-authentication). TOTP accepts each time step once and one step of clock
drift, so a second sign-in within the same 30 seconds uses the next step's code, and a third waits for
the step after.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyotp
import requests
import schemathesis

CSRF = {"X-Requested-With": "schemathesis"}
SESSION_SECONDS = 3600  # longer than the bounded run: one sign-in per run


def sign_in(run_json: Path, ahead: int = 0) -> str:
    """The ``aiplat_sid`` cookie of a password + TOTP sign-in of the demo user (the code of the step
    ``ahead`` steps from now)."""
    info = json.loads(run_json.read_text())
    base, demo = info["urls"]["identity"], info["demo"]
    first = requests.post(f"{base}/signin/password", json={"email": demo["email"], "password": demo["password"]},
                          headers=CSRF, timeout=30)
    first.raise_for_status()
    totp = pyotp.TOTP(demo["totp_secret"])
    second = requests.post(f"{base}/signin/mfa", headers=CSRF, timeout=30,
                           json={"mfa_token": first.json()["mfa_token"],
                                 "code": totp.at(time.time() + ahead * totp.interval)})
    if second.status_code == 401 and second.json().get("code") == "code_already_used":
        if ahead:
            time.sleep(totp.interval - time.time() % totp.interval + 1)
        return sign_in(run_json, ahead=1)
    second.raise_for_status()
    return second.cookies["aiplat_sid"]


@schemathesis.auth(refresh_interval=SESSION_SECONDS).apply_to(path_regex="^/account")
class SessionCookie:
    """The demo user's session cookie on the account paths."""

    def get(self, case: Any, context: Any) -> str:
        return sign_in(Path(os.environ["IDENTITY_FUZZ_RUN_JSON"]))

    def set(self, case: Any, data: str, context: Any) -> None:
        case.cookies = {**(case.cookies or {}), "aiplat_sid": data}
