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
again on a 401 (``retry_on=[]``): cases without the cookie answer 401 by design. Each sign-in is checked
with ``GET /account`` before use, and the hooks log (``IDENTITY_FUZZ_LOG``) whether the session still works.
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


def _log(line: str) -> None:
    """One line of the hooks' own log (``IDENTITY_FUZZ_LOG``), which the test shows when the run fails."""
    path = os.environ.get("IDENTITY_FUZZ_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{time.strftime('%H:%M:%S')} {line}\n")


def _sign_in_once(base: str, demo: dict[str, str], ahead: int) -> requests.Response:
    first = requests.post(f"{base}/signin/password", json={"email": demo["email"], "password": demo["password"]},
                          headers=CSRF, timeout=30)
    if first.status_code != 200:
        return first
    totp = pyotp.TOTP(demo["totp_secret"])
    return requests.post(f"{base}/signin/mfa", headers=CSRF, timeout=30,
                         json={"mfa_token": first.json()["mfa_token"],
                               "code": totp.at(time.time() + ahead * totp.interval)})


def sign_in(run_json: Path, attempts: int = 6) -> dict[str, str]:
    """``{"cookie", "session_id"}`` of a password + TOTP sign-in of the demo user, checked with
    ``GET /account`` before it is used. A refused step (a TOTP code already used, a busy stack) is tried
    again with the next TOTP step, after that step has begun when the next one was used too."""
    info = json.loads(run_json.read_text())
    base, demo = info["urls"]["identity"], info["demo"]
    totp = pyotp.TOTP(demo["totp_secret"])
    problem = ""
    for attempt in range(attempts):
        ahead = min(attempt, 1)
        if attempt >= 2:  # the current and the next step are both spent: wait for the next step to begin
            time.sleep(totp.interval - time.time() % totp.interval + 1)
        answer = _sign_in_once(base, demo, ahead)
        if answer.status_code == 200:
            cookie = answer.cookies.get("aiplat_sid", "")
            check = requests.get(f"{base}/account", cookies={"aiplat_sid": cookie}, timeout=30)
            _log(f"signed in at {base} (attempt {attempt + 1}): session {answer.json().get('session_id')}, "
                 f"GET /account {check.status_code}")
            if check.status_code == 200:
                return {"cookie": cookie, "session_id": answer.json()["session_id"]}
            problem = f"GET /account with the new cookie answered {check.status_code}: {check.text[:300]}"
        else:
            problem = f"{answer.request.method} {answer.url} answered {answer.status_code}: {answer.text[:300]}"
        _log(f"sign-in attempt {attempt + 1} refused: {problem}")
    raise RuntimeError(f"the demo user could not sign in at {base}: {problem}")


class _Checked:
    """Logs, once a minute at most, whether the run's session still signs in (``GET /account``)."""

    last = 0.0

    @classmethod
    def probe(cls, base: str, cookie: str) -> None:
        if time.monotonic() - cls.last < 60:
            return
        cls.last = time.monotonic()
        check = requests.get(f"{base}/account", cookies={"aiplat_sid": cookie}, timeout=30)
        _log(f"the run's session: GET /account {check.status_code}")


@schemathesis.auth(refresh_interval=SESSION_SECONDS, retry_on=[]).apply_to(path_regex="^/account")
class SessionCookie:
    """The demo user's session cookie on the account paths."""

    def get(self, case: Any, context: Any) -> dict[str, str]:
        return sign_in(Path(os.environ["IDENTITY_FUZZ_RUN_JSON"]))

    def set(self, case: Any, data: dict[str, str], context: Any) -> None:
        if (case.path_parameters or {}).get("session_id") == data["session_id"]:
            return  # ending the run's own session: sent signed out
        case.cookies = {**(case.cookies or {}), "aiplat_sid": data["cookie"]}
        _Checked.probe(json.loads(Path(os.environ["IDENTITY_FUZZ_RUN_JSON"]).read_text())["urls"]["identity"],
                       data["cookie"])
