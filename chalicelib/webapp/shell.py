"""The app shell at {app_url}: the OAuth round trip of a signed-out visitor and a "who am I" page.

The shell is a registered *public* OAuth client (``APP_CLIENT_ID``, default ``app-shell``; no secret,
PKCE S256). A visitor without a valid access token is sent to ``{auth_url}/oauth2/authorize`` with a
fresh ``state`` (bound to the browser by an HttpOnly cookie) and PKCE challenge; the verifier and
the original path wait server-side (``flows``, 10 minutes, single use). ``/callback`` exchanges the
code at ``{auth_url}/oauth2/token``; ``session`` keeps the tokens in HttpOnly cookies (a
backend-for-frontend: page JavaScript never sees them), then the browser returns to the original path.
"""
from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from urllib.parse import urlencode

from pynamodb.exceptions import PutError

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.core.store.tables import global_model
from chalicelib.identity.models import OAuthClientAttrs
from chalicelib.identity.signin import flows
from chalicelib.identity.sso import http_client

STATE_COOKIE = "app_state"
TOKEN_COOKIE = "app_at"
FLOW_TTL = 600


def client_id() -> str:
    return settings().app_client_id


def redirect_uri() -> str:
    return settings().app_url + "/callback"


def ensure_app_client() -> str:
    """Seed: register the shell as a public client (authorization code + PKCE); idempotent."""
    cls = global_model(OAuthClientAttrs)
    item = cls(client_id(), name="AI Platform web app", secret_hash=None, confidential=False,
               grant_types=json.dumps(["authorization_code", "refresh_token"]),
               redirect_uris=json.dumps([redirect_uri()]), created_at=clock.iso())
    try:
        item.save(condition=OAuthClientAttrs.client_id.does_not_exist())
    except PutError:
        existing = cls.get(client_id(), consistent_read=True)
        uris = json.loads(existing.redirect_uris)
        if redirect_uri() not in uris:
            existing.update(actions=[OAuthClientAttrs.redirect_uris.set(json.dumps(uris + [redirect_uri()]))])
    return client_id()


def safe_path(path: str) -> str:
    """Only a local absolute path may be returned to (never ``//host`` or a scheme)."""
    if not path.startswith("/") or path.startswith("//") or "\\" in path or len(path) > 1024:
        return "/"
    return path


def begin(path: str, prompt: str | None = None) -> tuple[str, str]:
    """Start a sign-in round trip: (authorization URL, state for the browser cookie).

    ``prompt="login"`` asks the identity service for a fresh sign-in (after an MFA-required refusal the
    user signs in again with a second factor instead of reusing the first-factor session)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    state = flows.put("app", {"verifier": verifier, "path": safe_path(path)}, FLOW_TTL)
    query = urlencode({"response_type": "code", "client_id": client_id(), "redirect_uri": redirect_uri(),
                       "scope": "openid email", "state": state, "code_challenge": challenge,
                       "code_challenge_method": "S256", **({"prompt": prompt} if prompt else {})})
    return f"{settings().auth_url}/oauth2/authorize?{query}", state


@dataclass(frozen=True)
class Finished:
    access_token: str
    expires_in: int
    path: str
    refresh_token: str | None = None
    id_token: str | None = None


class ShellError(Exception):
    """The round trip could not be completed; the page says so and offers to start again."""


def finish(state: str, cookie_state: str | None, code: str) -> Finished:
    if not state or not cookie_state or not secrets.compare_digest(state, cookie_state):
        raise ShellError("The sign-in response does not belong to this browser.")
    flow = flows.take("app", state)
    if flow is None:
        raise ShellError("The sign-in response expired or was already used.")
    try:
        tokens = http_client.post_form(settings().auth_url + "/oauth2/token", {
            "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri(),
            "client_id": client_id(), "code_verifier": flow["verifier"]})
    except http_client.ProviderError as err:
        raise ShellError(f"The identity service refused the sign-in code ({err}).") from None
    return Finished(tokens["access_token"], int(tokens.get("expires_in", 900)), flow["path"],
                    tokens.get("refresh_token"), tokens.get("id_token"))


def abandon(state: str, cookie_state: str | None) -> str:
    """The page a refused round trip started from (so "sign in again" returns there), else ``/``."""
    if not state or not cookie_state or not secrets.compare_digest(state, cookie_state):
        return "/"
    flow = flows.take("app", state)
    return safe_path(flow["path"]) if flow else "/"
