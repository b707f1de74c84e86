"""Browser sessions at {auth_url}: the ``aiplat_sid`` cookie and its record in the global ``sessions`` table.

The cookie carries a 256-bit random session id; the table stores only its SHA-256 (``sid_hash``), so
a leaked table yields no usable session. Each record has a public ``session_id`` (``sess_...``, shown
in the account settings and used to revoke), the user, the ``amr`` of the sign-in that created it, the
caller's IP and user agent, and an absolute expiry (``SESSION_TTL_SECONDS``; DynamoDB TTL purges it).

Cookie: ``aiplat_sid=<sid>; HttpOnly; SameSite=Lax; Path=/; Max-Age=...`` plus ``Secure`` when
{auth_url} is https. ``check_csrf`` guards every state-changing cookie-authenticated JSON endpoint.
"""
from __future__ import annotations

import json
from http.cookies import CookieError, SimpleCookie
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pynamodb.exceptions import DoesNotExist

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError
from chalicelib.core.ids import new_id
from chalicelib.core.store.tables import global_model
from chalicelib.core.tokens import is_revoked
from chalicelib.identity.models import SessionAttrs
from chalicelib.identity.oauth.revocation import end_session
from chalicelib.identity.opaque import digest, new_secret

if TYPE_CHECKING:  # routes pass their Ctx; this module only calls ctx.header()/ctx.request.method
    from chalicelib.core.http.api import Ctx

COOKIE_NAME = "aiplat_sid"
SESSION_TTL_SECONDS = 12 * 3600
MAX_SESSIONS_LISTED = 100


def _model() -> type[SessionAttrs]:
    return global_model(SessionAttrs)


def create_session(user_id: str, amr: list[str], *, caller: Any) -> tuple[str, SessionAttrs]:
    """Start a session; returns the raw sid (for the cookie, never stored) and the record."""
    sid = new_secret()
    now = clock.now()
    record = _model()(digest(sid), session_id=new_id("sess"), user_id=user_id,
                      amr_json=json.dumps(sorted(set(amr))), created_at=int(now),
                      expires_at=int(now) + SESSION_TTL_SECONDS,
                      ip=(getattr(caller, "ip", "") or None), user_agent=(getattr(caller, "user_agent", "") or None))
    record.save(condition=SessionAttrs.sid_hash.does_not_exist())
    return sid, record


def get_by_sid(sid: str) -> SessionAttrs | None:
    if not sid or len(sid) > 128:
        return None
    try:
        record = _model().get(digest(sid), consistent_read=True)
    except DoesNotExist:
        return None
    if record.expires_at <= clock.now() or is_revoked(f"sid:{record.session_id}"):
        return None  # expired, or ended (its tokens refused) by any path: the cookie signs no one in
    return record


def sid_from_cookie_header(cookie_header: str | None) -> str | None:
    if not cookie_header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(cookie_header)
    except CookieError:
        return None
    morsel = jar.get(COOKIE_NAME)
    return morsel.value if morsel is not None and morsel.value else None


def session_from_request(ctx: Ctx) -> SessionAttrs | None:
    """The live session named by the request's cookie, or None."""
    sid = sid_from_cookie_header(ctx.header("cookie"))
    return get_by_sid(sid) if sid else None


def require_session(ctx: Ctx) -> SessionAttrs:
    """The live session, or a 401 problem (``session_required``)."""
    record = session_from_request(ctx)
    if record is None:
        raise ApiError(401, "session_required", "Sign in first: this call needs a signed-in browser session.")
    return record


def _secure() -> bool:
    return settings().auth_url.lower().startswith("https://")


def set_cookie_header(sid: str) -> str:
    attrs = [f"{COOKIE_NAME}={sid}", "HttpOnly", "SameSite=Lax", "Path=/", f"Max-Age={SESSION_TTL_SECONDS}"]
    if _secure():
        attrs.append("Secure")
    return "; ".join(attrs)


def clear_cookie_header() -> str:
    attrs = [f"{COOKIE_NAME}=", "HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=0",
             "Expires=Thu, 01 Jan 1970 00:00:00 GMT"]
    if _secure():
        attrs.append("Secure")
    return "; ".join(attrs)


def list_sessions(user_id: str) -> list[SessionAttrs]:
    now = clock.now()
    out = [s for s in _model().by_user.query(user_id, limit=MAX_SESSIONS_LISTED * 2) if s.expires_at > now]
    out.sort(key=lambda s: s.created_at, reverse=True)
    return out[:MAX_SESSIONS_LISTED]


def revoke_session(session_id: str, user_id: str) -> bool:
    """Sign out the user's session ``session_id`` and refuse every token issued in it (exchanged ones
    included); False when it is not theirs or does not exist."""
    cls = _model()
    for record in cls.by_user.query(user_id, cls.session_id == session_id):
        end_session(record.session_id, "signed_out", user_id)
        return True
    return False


def revoke_all(user_id: str, *, keep_session_id: str | None = None) -> int:
    cls = _model()
    count = 0
    for record in cls.by_user.query(user_id):
        if record.session_id != keep_session_id:
            end_session(record.session_id, "signed_out", user_id)
            count += 1
    return count


def auth_origin() -> str:
    parts = urlsplit(settings().auth_url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def check_csrf(ctx: Ctx) -> None:
    """Refuse a cross-site state-changing call on a cookie session (403 ``csrf_refused``).

    Requires ``Content-Type: application/json`` (a cross-site form cannot send it without a CORS
    preflight, which this service never grants) and an ``Origin`` equal to the {auth_url} origin; a
    caller that sends no ``Origin`` (not a browser) must send ``X-Requested-With`` instead.
    """
    content_type = (ctx.header("content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise ApiError(403, "csrf_refused", "State-changing calls must send Content-Type: application/json.")
    origin = ctx.header("origin")
    if origin is not None:
        if origin.rstrip("/").lower() != auth_origin():
            raise ApiError(403, "csrf_refused", "The request's Origin is not this service.")
    elif not ctx.header("x-requested-with"):
        raise ApiError(403, "csrf_refused", "Send an Origin header (browsers do) or X-Requested-With.")
