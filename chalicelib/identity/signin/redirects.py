"""Where a finished sign-in may send the browser (``return_to``).

Accepted: a relative path on {auth_url} (``/oauth2/authorize?...``, ``/account``): it must start with
one ``/`` (not ``//`` or ``/\\``), have no scheme or host, no control characters, and at most 2048
characters; or an absolute URL exactly equal to a redirect URI registered by an OAuth client. Anything
else is a 400, never an open redirect. The answer is always an absolute URL.
"""
from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

from chalicelib.core import process_state
from chalicelib.core.config import settings
from chalicelib.core.http.errors import validation_error
from chalicelib.core.store.tables import global_model
from chalicelib.identity.models import OAuthClientAttrs

DEFAULT_PATH = "/account"
MAX_LEN = 2048
_CACHE_SECONDS = 60
_cache: tuple[float, frozenset[str]] = (-1e18, frozenset())


def _registered_targets() -> frozenset[str]:
    global _cache
    loaded_at, targets = _cache
    if time.monotonic() - loaded_at > _CACHE_SECONDS:
        found: set[str] = set()
        for client in global_model(OAuthClientAttrs).scan():
            found.update(json.loads(client.redirect_uris or "[]"))
        _cache = (time.monotonic(), frozenset(found))
    return _cache[1]


def forget_cache() -> None:
    global _cache
    _cache = (-1e18, frozenset())


process_state.enrol("identity.signin.redirects", forget_cache)


def is_safe_relative(value: str) -> bool:
    if not value.startswith("/") or value.startswith("//") or value.startswith("/\\"):
        return False
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value) or "\\" in value:
        return False
    parts = urlsplit(value)
    return not parts.scheme and not parts.netloc


def safe_return_to(value: object) -> str:
    """The absolute URL to send the browser to; 400 ``validation_failed`` for anything unsafe."""
    if value is None or value == "":
        return settings().auth_url + DEFAULT_PATH
    if not isinstance(value, str) or len(value) > MAX_LEN:
        raise validation_error([{"field": "return_to", "message": "must be a string of at most 2048 characters"}])
    if is_safe_relative(value):
        return settings().auth_url + value
    if value in _registered_targets():
        return value
    forget_cache()  # a client registered a moment ago
    if value in _registered_targets():
        return value
    raise validation_error([{"field": "return_to", "message": "must be a relative path on this service or a "
                                                              "registered redirect URI"}])
