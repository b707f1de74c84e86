"""Authorization requests waiting for the user's answer on the consent page.

``/oauth2/authorize`` stores the validated request (``flows``, kind ``consent``, 10 minutes, single use)
bound to the browser session that made it, and sends the browser to ``PAGE_PATH?request=<key>``. Only that
session may read or answer it; an answer consumes it.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from chalicelib.core.config import settings
from chalicelib.identity.models import SessionAttrs
from chalicelib.identity.signin import flows

KIND = "consent"
TTL_SECONDS = 600
PAGE_PATH = "/oauth2/consent"
MAX_KEY = 64


def begin(*, params: dict[str, str], session: SessionAttrs, client_id: str, workspace_id: str, scopes: list[str],
          resource: str | None, redirect_uri: str, state: str | None) -> str:
    """Store the request; the consent page's URL."""
    again = {k: v for k, v in params.items() if k not in ("prompt", "max_age")}
    if workspace_id:
        again["workspace_id"] = workspace_id
    key = flows.put(KIND, {"params": again, "session_id": session.session_id, "user_id": session.user_id,
                           "client_id": client_id, "workspace_id": workspace_id, "scopes": scopes,
                           "resource": resource, "redirect_uri": redirect_uri, "state": state}, TTL_SECONDS)
    return f"{settings().auth_url}{PAGE_PATH}?{urlencode({'request': key})}"


def _usable(key: str) -> bool:
    return isinstance(key, str) and 0 < len(key) <= MAX_KEY


def peek(key: str, session: SessionAttrs | None) -> dict[str, Any] | None:
    """The request, when it exists, is live and belongs to this session."""
    if session is None or not _usable(key):
        return None
    data = flows.peek(KIND, key)
    return data if data is not None and data["session_id"] == session.session_id else None


def take(key: str, session: SessionAttrs) -> dict[str, Any] | None:
    """Consume the request (this session's only)."""
    if peek(key, session) is None:
        return None
    return flows.take(KIND, key)
