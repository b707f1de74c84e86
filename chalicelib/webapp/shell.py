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
import re
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlencode

from pynamodb.exceptions import PutError

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.core.http import outbound
from chalicelib.core.store.tables import global_model
from chalicelib.identity.models import OAuthClientAttrs
from chalicelib.identity.signin import flows
from chalicelib.identity.sso import http_client
from chalicelib.webapp import pages

STATE_COOKIE = "app_state"
MAX_PATH = 1024
_VISIBLE_ASCII = re.compile(r"[\x21-\x7e]*")
_SEGMENT_TEXT = re.compile(r"[A-Za-z0-9/:@!$&'()*+,;=._~-]*")  # a decoded page address: no '%', '?', space...
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0080-\u009f\\]")
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
    """Only a local absolute path of visible ASCII (never ``//host``, a scheme, a backslash, whitespace or a
    control character, which browsers strip or turn into ``/``) is kept; anything else becomes ``/``."""
    if (not isinstance(path, str) or not path.startswith("/") or path.startswith("//") or "\\" in path
            or len(path) > MAX_PATH or not _VISIBLE_ASCII.fullmatch(path)):
        return "/"
    return path


def return_path(path: str) -> str:
    """Where the browser may be sent after signing in: a page address the app knows (``pages.page_name``),
    compared after normalisation (percent-escapes decoded, no empty, ``.`` or ``..`` segment, no
    whitespace or control character anywhere, decoded or not), and written back in one canonical
    encoding. Anything else is ``/``."""
    path = safe_path(path)
    bare, _, query = path.partition("?")
    decoded = unquote(bare, errors="strict")
    segments = decoded.split("/")[1:]
    if decoded != "/" and decoded.endswith("/"):
        segments = segments[:-1]
    if (decoded != "/" and any(s in ("", ".", "..") for s in segments)) or not _SEGMENT_TEXT.fullmatch(decoded) \
            or pages.page_name(decoded) is None:
        return "/"
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query), errors="strict")
    except (ValueError, UnicodeDecodeError):
        return "/"
    if any(_CONTROL.search(k + v) for k, v in pairs):
        return "/"
    canonical = quote(decoded, safe="/:@!$&'()*+,;=-._~")
    return canonical + ("?" + urlencode(pairs) if pairs else "")


def begin(path: str, prompt: str | None = None) -> tuple[str, str]:
    """Start a sign-in round trip: (authorization URL, state for the browser cookie).

    ``prompt="login"`` asks the identity service for a fresh sign-in (after an MFA-required refusal the
    user signs in again with a second factor instead of reusing the first-factor session)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    state = flows.put("app", {"verifier": verifier, "path": return_path(path)}, FLOW_TTL)
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
            "client_id": client_id(), "code_verifier": flow["verifier"]}, policy=outbound.TRUSTED)
    except http_client.ProviderError as err:
        raise ShellError(f"The identity service refused the sign-in code ({err}).") from None
    return Finished(tokens["access_token"], int(tokens.get("expires_in", 900)), flow["path"],
                    tokens.get("refresh_token"), tokens.get("id_token"))


def abandon(state: str, cookie_state: str | None) -> str:
    """The page a refused round trip started from (so "sign in again" returns there), else ``/``."""
    if not state or not cookie_state or not secrets.compare_digest(state, cookie_state):
        return "/"
    flow = flows.take("app", state)
    return return_path(flow["path"]) if flow else "/"
