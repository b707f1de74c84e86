"""The browser session of the web app (a backend-for-frontend): which cookies hold what, and the
token calls the app makes at the identity service on the browser's behalf.

Where the tokens live (docs/webapp.md, "Token storage"): the access token, the rotating refresh
token and the ID token are kept in HttpOnly cookies on the app's own origin, so page JavaScript never
sees a token and nothing lands in a URL or in local storage. The access token cookie (``app_at``,
``Path=/``) is read only by the app's server side, which forwards API calls with it (``upstream``).
The refresh token, the ID token (the sign-out hint) and the chosen workspace live on ``Path=/session``
with ``SameSite=Strict``: only the app's refresh, switch and sign-out calls ever carry them.
"""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode, urlsplit

from chalicelib.core.config import settings
from chalicelib.core.http import outbound
from chalicelib.core.http.errors import ApiError
from chalicelib.core.tokens import verifier
from chalicelib.identity.oauth.grants.token_exchange import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE
from chalicelib.identity.sso import http_client
from chalicelib.webapp import shell

ACCESS = shell.TOKEN_COOKIE
REFRESH = "app_rt"
ID_TOKEN = "app_idt"
WORKSPACE = "app_ws"
SESSION_PATH = "/session"
WORKSPACE_ID_RE = re.compile(r"^ws_[0-9A-Za-z]{1,64}$")
LONG_LIVED = 30 * 24 * 3600  # the refresh family's own limit (identity/oauth/grants/authorization_code.py) ends it sooner


def read_cookies(header: str | None) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header or "")
    except Exception:  # noqa: BLE001  (a malformed Cookie header is treated as no cookies)
        return {}
    return {k: m.value for k, m in jar.items()}


def _secure() -> str:
    return "; Secure" if settings().app_url.startswith("https://") else ""


def set_cookie(name: str, value: str, max_age: int) -> str:
    path, same_site = ("/", "Lax") if name == ACCESS else (SESSION_PATH, "Strict")
    return f"{name}={value}; Path={path}; HttpOnly; SameSite={same_site}; Max-Age={max_age}{_secure()}"


def clear_cookies() -> list[str]:
    return [set_cookie(name, "", 0) for name in (ACCESS, REFRESH, ID_TOKEN, WORKSPACE)]


def valid_claims(token: str | None) -> dict[str, Any] | None:
    """The claims of a still-valid access token (signature, issuer, audience, expiry, revocation)."""
    if not token:
        return None
    try:
        return verifier().claims(token)
    except ApiError:
        return None


PUBLIC_CLAIMS = ("sub", "email", "workspace_id", "roles", "amr", "exp")


def public_claims(claims: dict[str, Any]) -> dict[str, Any]:
    """What the page may know of its session: who, which workspace, which roles, how signed in, until when
    (``/session/claims`` and the shell's ``data-claims``); never the token."""
    return {k: claims.get(k) for k in PUBLIC_CLAIMS}


@dataclass(frozen=True)
class Issued:
    """Tokens to put into cookies after a sign-in, refresh or switch."""

    access_token: str
    expires_in: int
    refresh_token: str | None = None
    id_token: str | None = None
    workspace_id: str | None = None

    def cookies(self) -> list[str]:
        out = [set_cookie(ACCESS, self.access_token, self.expires_in)]
        if self.refresh_token:
            out.append(set_cookie(REFRESH, self.refresh_token, LONG_LIVED))
        if self.id_token:
            out.append(set_cookie(ID_TOKEN, self.id_token, LONG_LIVED))
        if self.workspace_id:
            out.append(set_cookie(WORKSPACE, self.workspace_id, LONG_LIVED))
        return out


class SessionError(Exception):
    """The identity service refused; ``code`` is its OAuth error (``mfa_required``, ``access_denied``...)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


def _token_call(form: dict[str, str]) -> dict[str, Any]:
    status, body = http_client.request("POST", settings().auth_url + "/oauth2/token", form=form,
                                       policy=outbound.TRUSTED)
    try:
        import json  # noqa: PLC0415

        parsed = json.loads(body)
    except ValueError:
        raise SessionError("server_error", f"The identity service answered HTTP {status}.") from None
    if status != 200:
        raise SessionError(str(parsed.get("error") or parsed.get("code") or "invalid_grant"),
                           str(parsed.get("error_description") or parsed.get("detail") or "Refused."))
    return dict(parsed)


def exchange(access_token: str, workspace_id: str) -> Issued:
    """RFC 8693 token exchange at the identity service: a token of the same user for ``workspace_id``."""
    if not WORKSPACE_ID_RE.match(workspace_id):
        raise SessionError("invalid_request", "That is not a workspace id.")
    got = _token_call({"grant_type": TOKEN_EXCHANGE, "subject_token": access_token,
                       "subject_token_type": ACCESS_TOKEN_TYPE, "workspace_id": workspace_id,
                       "client_id": shell.client_id()})
    return Issued(got["access_token"], int(got.get("expires_in", 900)), workspace_id=workspace_id)


def refresh(cookies: dict[str, str]) -> Issued:
    """A fresh access token from the refresh cookie (rotated), re-exchanged into the chosen workspace."""
    rt = cookies.get(REFRESH)
    if not rt:
        raise SessionError("login_required", "There is no session to refresh; sign in again.")
    got = _token_call({"grant_type": "refresh_token", "refresh_token": rt, "client_id": shell.client_id()})
    issued = Issued(got["access_token"], int(got.get("expires_in", 900)), got.get("refresh_token"),
                    got.get("id_token"))
    chosen = cookies.get(WORKSPACE)
    claims = valid_claims(issued.access_token) or {}
    if chosen and claims.get("workspace_id") != chosen:
        try:
            switched = exchange(issued.access_token, chosen)
        except SessionError:
            return issued  # membership gone: stay in the sign-in's workspace
        return Issued(switched.access_token, switched.expires_in, issued.refresh_token, issued.id_token, chosen)
    return issued


def sign_out(cookies: dict[str, str]) -> str:
    """Revoke the refresh grant (its access tokens stop working) and return where the browser goes
    next: the identity service's end-session endpoint, which ends the sign-in session there too."""
    rt = cookies.get(REFRESH)
    if rt:
        try:
            http_client.request("POST", settings().auth_url + "/oauth2/revoke",
                                form={"token": rt, "client_id": shell.client_id()}, policy=outbound.TRUSTED)
        except http_client.ProviderError:
            pass  # the end-session step below still ends the identity session
    query = {"client_id": shell.client_id(), "post_logout_redirect_uri": settings().app_url + "/signed-out",
             "state": secrets.token_urlsafe(8)}
    if cookies.get(ID_TOKEN):
        query["id_token_hint"] = cookies[ID_TOKEN]
    return f"{settings().auth_url}/oauth2/logout?{urlencode(query)}"


def app_origin() -> str:
    parts = urlsplit(settings().app_url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def same_origin(origin: str | None, requested_with: str | None) -> bool:
    """CSRF rule for every state-changing or proxied call: the browser's ``Origin`` must be the app's,
    and the custom ``X-Requested-With`` header (which no cross-site form or simple request can send
    without a CORS preflight the app never grants) must be present."""
    if not requested_with:
        return False
    return origin is None or origin.rstrip("/").lower() == app_origin()
