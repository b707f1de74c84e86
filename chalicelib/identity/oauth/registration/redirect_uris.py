"""Which redirect URIs a client may register (by an operator, RFC 7591 registration or a Client ID
Metadata Document): absolute https, or http on a loopback host (native apps, RFC 8252), no fragment or
wildcard. Redirect URIs are then matched exactly (``oauth/authorize.py``)."""
from __future__ import annotations

from urllib.parse import urlsplit


def redirect_uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be registered: absolute https (or http on a loopback host), no fragment."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - a port that is not a number is malformed (ValueError)
    except ValueError:  # an unbalanced IPv6 bracket, a port out of range
        return "must be an absolute http(s) URL without a fragment or wildcard"
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.fragment or "*" in uri:
        return "must be an absolute http(s) URL without a fragment or wildcard"
    if parts.scheme == "http" and parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        return "must use https (http is allowed only on a loopback host)"
    return None
