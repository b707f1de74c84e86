"""Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, the MCP clients' preferred
registration): a ``client_id`` that is an https URL names the client's own JSON metadata document, which
the identity service fetches instead of looking the client up in ``oauth_clients``.

The document must be served at exactly that URL (no redirect), as JSON of at most ``MAX_BYTES``, and say
``client_id`` = the URL, ``redirect_uris`` (checked like a registration's), ``token_endpoint_auth_method``
``none`` (a public client: PKCE is always required); ``grant_types`` may add ``refresh_token``. Fetching is
SSRF-guarded: https only, port 443, a host name (not an address literal), fetched by the one outbound
client (``core/http/outbound.py``), which resolves it once, refuses it unless every address is public
(``OUTBOUND_ALLOW`` does not apply), connects to the checked address and refuses redirects; 3 seconds in
all. A fetched document is trusted for ``CACHE_SECONDS`` per container; a fetch that fails answers
``invalid_request`` (unknown client) and is not cached.
"""
from __future__ import annotations

import ipaddress
import json
import ssl
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from chalicelib.core import clock, process_state
from chalicelib.core.http import outbound
from chalicelib.identity.models import OAuthClientAttrs
from chalicelib.identity.oauth.registration.redirect_uris import redirect_uri_problem

MAX_BYTES = 5 * 1024
MAX_URL = 512
TIMEOUT_SECONDS = 3.0
CACHE_SECONDS = 300
# Test stacks serve documents from a loopback HTTPS server with their own CA: tests set these two, nothing else.
PRIVATE_ADDRESSES_ALLOWED = False
SSL_CONTEXT: ssl.SSLContext | None = None

_cache: dict[str, tuple[float, OAuthClientAttrs]] = {}
_lock = threading.Lock()


def is_metadata_url(client_id: str) -> bool:
    """Whether ``client_id`` has the shape of a metadata document URL (https, a host, a path, no fragment)."""
    if not isinstance(client_id, str) or not client_id.startswith("https://") or len(client_id) > MAX_URL:
        return False
    parts = urlsplit(client_id)
    return bool(parts.hostname) and parts.path not in ("", "/") and not parts.fragment and not parts.username \
        and not parts.password


def _is_name(host: str) -> bool:
    """An address literal is never a client's identity: only host names are fetched."""
    try:
        ipaddress.ip_address(host)
        return False
    except ValueError:
        return bool(host)


def _fetch(url: str) -> dict[str, Any] | None:
    parts = urlsplit(url)
    try:
        port = parts.port or 443
    except ValueError:
        return None
    if parts.scheme != "https" or (port != 443 and not PRIVATE_ADDRESSES_ALLOWED) or not _is_name(parts.hostname or ""):
        return None
    try:
        answer = outbound.request("GET", url, headers={"Accept": "application/json", "User-Agent": "aiplat-identity/1"},
                                  policy=outbound.Policy(private=PRIVATE_ADDRESSES_ALLOWED, declared=False),
                                  timeouts=outbound.Timeouts.within(TIMEOUT_SECONDS), max_bytes=MAX_BYTES,
                                  tls=SSL_CONTEXT)
    except outbound.OutboundError:  # refused, unreachable, too slow, too large, or a redirect: no client
        return None
    if answer.status != 200:
        return None
    try:
        doc = json.loads(answer.body)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _client_of(url: str, doc: dict[str, Any]) -> OAuthClientAttrs | None:
    """The client the document describes, or None when it is not an acceptable document for ``url``."""
    redirects = doc.get("redirect_uris")
    grants = doc.get("grant_types", ["authorization_code"])
    if doc.get("client_id") != url or doc.get("token_endpoint_auth_method", "none") != "none":
        return None
    if not isinstance(redirects, list) or not 1 <= len(redirects) <= 10 or not all(
            isinstance(u, str) and len(u) <= 512 and redirect_uri_problem(u) is None for u in redirects):
        return None
    if not isinstance(grants, list) or "authorization_code" not in grants or \
            set(grants) - {"authorization_code", "refresh_token"}:
        return None
    name = doc.get("client_name") if isinstance(doc.get("client_name"), str) else urlsplit(url).hostname
    return OAuthClientAttrs(url, name=str(name)[:100], secret_hash=None, confidential=False,
                            grant_types=json.dumps(grants), redirect_uris=json.dumps(redirects),
                            created_at=clock.iso(), registration="metadata_document")


def client(url: str) -> OAuthClientAttrs | None:
    """The client named by a metadata document URL, fetched (or from this container's cache), or None."""
    if not is_metadata_url(url):
        return None
    hit = _cache.get(url)
    if hit is not None and hit[0] > time.monotonic():
        return hit[1]
    doc = _fetch(url)
    found = _client_of(url, doc) if doc is not None else None
    if found is not None:
        with _lock:
            if len(_cache) > 1000:
                _cache.clear()
            _cache[url] = (time.monotonic() + CACHE_SECONDS, found)
    return found


def forget() -> None:
    _cache.clear()


process_state.enrol(f"{__name__}._cache", forget)
