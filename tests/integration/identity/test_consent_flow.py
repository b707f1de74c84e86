"""Third-party consent through the real stack (`make run`'s servers over HTTP): an attacker's self-registered
client gets no code from a signed-in browser until the user allowed it; prompt=none answers
consent_required; Deny answers access_denied; a remembered consent skips the page while a new scope or
workspace asks again; revoking the connected app kills its refresh token at once. Also: a refresh naming a
resource the grant does not hold leaves the refresh token usable, and a plain OAuth request (no openid) of
the web app's client gets a code."""
from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests

from tests.integration.conftest import RunningPlatform
from tests.integration.sessions import email_code_session

pytestmark = pytest.mark.integration
ATTACKER = "https://attacker.example/cb"  # never visited: the redirect's Location is read


@pytest.fixture(scope="module")
def cookie(platform: RunningPlatform) -> str:
    return email_code_session(platform, platform.demo["email"])  # the demo user, an Admin: e-mail code + TOTP


def params_of(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


class Attacker:
    """A public client anyone can register, and its authorization requests from the victim's browser."""

    def __init__(self, platform: RunningPlatform, cookie: str) -> None:
        self.identity, self.cookie = platform.urls["identity"], cookie
        r = requests.post(self.identity + "/oauth2/register", timeout=30, json={
            "redirect_uris": [ATTACKER], "token_endpoint_auth_method": "none", "client_name": "Calendar Helper",
            "grant_types": ["authorization_code", "refresh_token"]})
        assert r.status_code == 201, r.text
        self.client_id = r.json()["client_id"]
        self.verifier = secrets.token_urlsafe(48)
        self.challenge = base64.urlsafe_b64encode(hashlib.sha256(self.verifier.encode()).digest()).rstrip(b"=").decode()

    def authorize(self, **extra: str) -> str:
        query = {"response_type": "code", "client_id": self.client_id, "redirect_uri": ATTACKER, "state": "st",
                 "scope": "openid", "code_challenge": self.challenge, "code_challenge_method": "S256", **extra}
        r = requests.get(self.identity + "/oauth2/authorize?" + urlencode(query), headers={"Cookie": self.cookie},
                         allow_redirects=False, timeout=30)
        assert r.status_code == 302, r.text
        return str(r.headers["Location"])

    def consent_page(self, location: str) -> str:
        assert location.startswith(self.identity + "/oauth2/consent?"), location
        assert "code=" not in location
        return params_of(location)["request"]

    def answer(self, key: str, decision: str) -> dict[str, str]:
        r = requests.post(self.identity + "/oauth2/consent", json={"request": key, "decision": decision}, timeout=30,
                          headers={"Cookie": self.cookie, "Origin": self.identity})
        assert r.status_code == 200, r.text
        return params_of(r.json()["redirect_to"])

    def token(self, **form: str) -> requests.Response:
        return requests.post(self.identity + "/oauth2/token", data={"client_id": self.client_id, **form}, timeout=30)

    def tokens(self, code: str) -> dict[str, Any]:
        r = self.token(grant_type="authorization_code", code=code, redirect_uri=ATTACKER, code_verifier=self.verifier)
        assert r.status_code == 200, r.text
        return dict(r.json())


def test_the_attackers_client_gets_no_code_without_consent(platform: RunningPlatform, cookie: str) -> None:
    attacker = Attacker(platform, cookie)
    key = attacker.consent_page(attacker.authorize())
    for extra in ({"workspace_id": platform.demo["eu_workspace_id"]},
                  {"resource": platform.regions["us-east-1"]["gateway"] + "/mcp"}):
        attacker.consent_page(attacker.authorize(**extra))
    silent = params_of(attacker.authorize(prompt="none"))
    assert silent["error"] == "consent_required" and "code" not in silent
    page = requests.get(platform.urls["identity"] + "/oauth2/consent?request=" + key, headers={"Cookie": cookie},
                        timeout=30)
    assert page.status_code == 200 and "Calendar Helper" in page.text and "attacker.example" in page.text
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    denied = attacker.answer(key, "deny")
    assert denied["error"] == "access_denied" and denied["state"] == "st" and "code" not in denied


def test_remembered_consent_skips_the_page_and_a_new_scope_or_workspace_asks(platform: RunningPlatform,
                                                                             cookie: str) -> None:
    attacker = Attacker(platform, cookie)
    code = attacker.answer(attacker.consent_page(attacker.authorize()), "allow")["code"]
    attacker.tokens(code)
    assert "code" in params_of(attacker.authorize())
    assert "code" in params_of(attacker.authorize(prompt="none"))
    attacker.consent_page(attacker.authorize(scope="openid email"))
    attacker.consent_page(attacker.authorize(workspace_id=platform.demo["eu_workspace_id"]))
    attacker.consent_page(attacker.authorize(prompt="consent"))


def test_revoking_the_connected_app_kills_its_refresh_token(platform: RunningPlatform, cookie: str) -> None:
    attacker = Attacker(platform, cookie)
    tokens = attacker.tokens(attacker.answer(attacker.consent_page(attacker.authorize()), "allow")["code"])
    identity = platform.urls["identity"]
    apps = requests.get(identity + "/account/connected-apps", headers={"Cookie": cookie}, timeout=30).json()
    [app] = [a for a in apps["connected_apps"] if a["client_id"] == attacker.client_id]
    r = requests.delete(identity + "/account/connected-apps/" + app["id"], timeout=30,
                        headers={"Cookie": cookie, "Origin": identity, "Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    r = attacker.token(grant_type="refresh_token", refresh_token=tokens["refresh_token"])
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    r = requests.get(identity + "/userinfo", headers={"Authorization": f"Bearer {tokens['access_token']}"}, timeout=30)
    assert r.status_code == 401


def test_a_refresh_with_a_foreign_resource_leaves_the_token_usable(platform: RunningPlatform, cookie: str) -> None:
    attacker = Attacker(platform, cookie)
    tokens = attacker.tokens(attacker.answer(attacker.consent_page(attacker.authorize()), "allow")["code"])
    r = attacker.token(grant_type="refresh_token", refresh_token=tokens["refresh_token"],
                       resource=platform.regions["us-east-1"]["gateway"] + "/mcp")
    assert r.status_code == 400 and r.json()["error"] == "invalid_target"
    r = attacker.token(grant_type="refresh_token", refresh_token=tokens["refresh_token"])
    assert r.status_code == 200, r.text  # not taken for a reuse: the grant and the session live on
    r = requests.get(platform.urls["identity"] + "/account/sessions", headers={"Cookie": cookie}, timeout=30)
    assert r.status_code == 200


def test_a_plain_oauth_request_of_the_web_app_gets_a_code(platform: RunningPlatform, cookie: str) -> None:
    """RFC 6749 section 3.3: scope ``email`` without ``openid`` from a signed-in browser, with the web app's
    (first-party) client: a code at once (no sign-in page, no consent page), and tokens without an ID token."""
    identity, app = platform.urls["identity"], platform.urls["app"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    r = requests.get(identity + "/oauth2/authorize?" + urlencode({
        "response_type": "code", "client_id": platform.demo["app_client_id"], "redirect_uri": app + "/callback",
        "scope": "email", "state": "plain", "code_challenge": challenge, "code_challenge_method": "S256"}),
        headers={"Cookie": cookie}, allow_redirects=False, timeout=30)
    assert r.status_code == 302 and r.headers["Location"].startswith(app + "/callback?"), r.headers.get("Location")
    answer = params_of(r.headers["Location"])
    assert answer["state"] == "plain" and answer["code"].startswith("ac_")
    r = requests.post(identity + "/oauth2/token", timeout=30, data={
        "grant_type": "authorization_code", "code": answer["code"], "redirect_uri": app + "/callback",
        "client_id": platform.demo["app_client_id"], "code_verifier": verifier})
    assert r.status_code == 200, r.text
    assert r.json()["scope"] == "email" and "id_token" not in r.json()
