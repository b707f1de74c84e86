"""Signed-in browser sessions for integration tests, as a real browser gets them."""
from __future__ import annotations

import itertools
import re
import secrets
import time
from typing import Any
from urllib.parse import urljoin, urlsplit

import pyotp
import requests

from tests.integration.conftest import RunningPlatform

_used_totp: set[str] = set()
_members = itertools.count(1)


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


def authorize_allowing(cookie: str, url: str) -> str:
    """The ``Location`` an authorization request ``url`` ends at for the signed-in ``cookie``, answering Allow
    on the consent page when a third-party client asks for the first time (as the user would)."""
    parts = urlsplit(url)
    identity = f"{parts.scheme}://{parts.netloc}"
    r = requests.get(url, headers={"Cookie": cookie}, allow_redirects=False, timeout=30)
    assert r.status_code == 302, r.text
    location = r.headers["Location"]
    if location.startswith(identity + "/oauth2/consent?"):
        key = location.split("request=", 1)[1]
        r = requests.post(identity + "/oauth2/consent", json={"request": key, "decision": "allow"}, timeout=30,
                          headers={"Cookie": cookie, "Origin": identity})
        assert r.status_code == 200, r.text
        location = r.json()["redirect_to"]
    return str(location)


def _cookies(resp: requests.Response) -> dict[str, str]:
    return {c.name: c.value for c in resp.cookies if c.value}


def _app_session(platform: RunningPlatform, identity_cookie: str) -> dict[str, str]:
    """The web app's cookies after its OAuth sign-in redirects, followed by hand with the identity
    session ``identity_cookie`` (the app and the identity service share a host, so no cookie jar)."""
    app = platform.urls["app"]
    r = requests.get(app + "/session/signin?path=/", allow_redirects=False, timeout=30)
    state = _cookies(r)
    r = requests.get(r.headers["Location"], headers={"Cookie": identity_cookie}, allow_redirects=False, timeout=30)
    assert r.status_code in (302, 303), r.text
    r = requests.get(urljoin(app, r.headers["Location"]), cookies=state, allow_redirects=False, timeout=30)
    assert r.status_code in (302, 303) and _cookies(r), r.text
    return _cookies(r)


def mfa_member(platform: RunningPlatform, role: str = "admin",
               workspaces: tuple[str, ...] = ("us-east-1",)) -> dict[str, Any]:
    """A new user of its own with a password and an authenticator (TOTP), ``role`` in the demo workspaces of
    ``workspaces`` (regions), set up through the real APIs as a person would: the demo Admin invites the
    address, the person signs in with an e-mailed code, accepts in the web app, enrols an authenticator and
    sets a password. Its codes are its own, so signing it in never waits for another sign-in's TOTP step.
    Returns ``email``, ``password`` and ``totp_secret`` (the demo user's keys)."""
    email = f"{role}-{next(_members)}@example.com"  # readable in screenshots; one process, one number each
    invited = []
    for region in workspaces:
        ws = platform.demo["workspaces"][region]
        r = requests.post(platform.regions[region]["platform"] + f"/workspaces/{ws['workspace_id']}/invitations",
                          json={"email": email, "role": role}, timeout=30,
                          headers={"Authorization": f"Bearer {ws['api_token']}"})
        assert r.status_code == 201, r.text
        invited.append((ws["workspace_id"], r.json()["id"]))
    cookie = email_code_session(platform, email)
    app_cookies = _app_session(platform, cookie)
    for workspace_id, invitation_id in invited:
        r = requests.post(platform.urls["app"] + f"/api/platform/v1/workspaces/{workspace_id}/invitations/"
                          f"{invitation_id}/accept", json={}, cookies=app_cookies, timeout=30,
                          headers={"X-Requested-With": "app"})
        assert r.status_code == 201, r.text
    identity, password = platform.urls["identity"], "mfa-" + secrets.token_urlsafe(12)
    headers = {"Cookie": cookie, "X-Requested-With": "test"}
    r = requests.post(identity + "/account/totp/setup", json={}, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    secret = r.json()["secret"]
    for _ in range(2):  # the previous step's code (the current one stays free for signing in); once more
        # if a step boundary passed before the server checked it (it was then two steps old)
        r = requests.post(identity + "/account/totp/confirm", json={"code": pyotp.TOTP(secret).at(time.time() - 30)},
                          headers=headers, timeout=30)
        if r.status_code != 400:
            break
    assert r.status_code == 200, r.text
    r = requests.post(identity + "/account/password", json={"new_password": password}, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return {"email": email, "password": password, "totp_secret": secret}
