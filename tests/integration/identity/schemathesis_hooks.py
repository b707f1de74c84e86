"""Schemathesis hooks of ``test_schemathesis.py``: a browser session for the cookie-authenticated paths.

Loaded by the Schemathesis process (``SCHEMATHESIS_HOOKS`` names this file). The auth provider signs the
stack's demo user in once, the way the sign-in page does (``POST /signin/password``, then
``POST /signin/mfa`` with the current TOTP code), and sends its ``aiplat_sid`` cookie on the operations
under ``/account``. ``IDENTITY_FUZZ_RUN_JSON`` is the stack's ``run.json`` (its identity URL and the demo
user's generated password and TOTP secret). ``POST /signout`` gets no real cookie (its session is
optional), so the fuzzer never ends the session it runs on.

The session lasts 12 hours, longer than any run, and is never ended by the run: ``DELETE
/account/sessions/{session_id}`` naming it (an id ``GET /account/sessions`` listed) is sent without the
cookie (401, an expected answer), so every other case runs signed in. Schemathesis does not sign in
again on a 401 (``retry_on=[]``): cases without the cookie answer 401 by design, and a new sign-in within
one 30-second TOTP step would be a reused code.
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
SESSION_SECONDS = 12 * 3600  # the session's own lifetime: one sign-in per run


def sign_in(run_json: Path, ahead: int = 0) -> dict[str, str]:
    """``{"cookie", "session_id"}`` of a password + TOTP sign-in of the demo user (the TOTP code of the
    step ``ahead`` steps from now; a reused step moves on to the next one)."""
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
    return {"cookie": second.cookies["aiplat_sid"], "session_id": second.json()["session_id"]}


@schemathesis.auth(refresh_interval=SESSION_SECONDS, retry_on=[]).apply_to(path_regex="^/account")
class SessionCookie:
    """The demo user's session cookie on the account paths."""

    def get(self, case: Any, context: Any) -> dict[str, str]:
        return sign_in(Path(os.environ["IDENTITY_FUZZ_RUN_JSON"]))

    def set(self, case: Any, data: dict[str, str], context: Any) -> None:
        if (case.path_parameters or {}).get("session_id") == data["session_id"]:
            return  # ending the run's own session: sent signed out
        case.cookies = {**(case.cookies or {}), "aiplat_sid": data["cookie"]}
