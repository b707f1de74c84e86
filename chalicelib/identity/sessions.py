"""INTERIM (signin-web): minimal browser sessions matching signin-core's interface, so the pages and
WebAuthn routes can be built and tested before signin-core lands. signin-core's module replaces it."""
from __future__ import annotations

from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlparse

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.core.errors import ApiError
from chalicelib.identity import flows

COOKIE = "aiplat_sid"
SESSION_TTL = 12 * 3600


@dataclass
class SessionAttrs:
    user_id: str
    amr: list[str] = field(default_factory=list)
    created_at: float = 0.0


def create_session(user_id: str, amr: list[str], *, caller: Any = None) -> tuple[str, SessionAttrs]:
    attrs = SessionAttrs(user_id, list(amr), clock.now())
    sid = flows.put("session", {"user_id": user_id, "amr": list(amr), "created_at": attrs.created_at}, SESSION_TTL)
    return sid, attrs


def _sid(ctx: Any) -> str | None:
    raw = ctx.header("cookie") or ""
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # noqa: BLE001 - a malformed cookie header is no session
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel else None


def session_from_request(ctx: Any) -> SessionAttrs | None:
    sid = _sid(ctx)
    data = flows.peek("session", sid) if sid else None
    return SessionAttrs(data["user_id"], data["amr"], data["created_at"]) if data else None


def require_session(ctx: Any) -> SessionAttrs:
    session = session_from_request(ctx)
    if session is None:
        raise ApiError(401, "not_signed_in", "Sign in first.")
    return session


def _secure() -> str:
    return "; Secure" if settings().auth_url.startswith("https://") else ""


def set_cookie_header(sid: str) -> str:
    return f"{COOKIE}={sid}; Path=/; HttpOnly; SameSite=Lax; Max-Age={SESSION_TTL}{_secure()}"


def clear_cookie_header() -> str:
    return f"{COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{_secure()}"


def check_csrf(ctx: Any) -> None:
    origin = ctx.header("origin")
    auth = urlparse(settings().auth_url)
    if origin and origin != f"{auth.scheme}://{auth.netloc}":
        raise ApiError(403, "csrf_failed", "Cross-site request refused.")
    if ctx.header("sec-fetch-site") not in (None, "same-origin", "none"):
        raise ApiError(403, "csrf_failed", "Cross-site request refused.")
