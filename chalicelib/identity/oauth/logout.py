"""OpenID Connect RP-Initiated Logout 1.0 (``GET {auth_url}/oauth2/logout``): a client that signed a
user in ends the user's sign-in session here too.

The browser's session is ended only with an ``id_token_hint`` this issuer signed for that client and
that names the session's user (the hint may have expired), so another site cannot sign a user out.
``post_logout_redirect_uri`` is followed only when it has the origin of one of the client's
registered redirect URIs; otherwise the answer is the plain "signed out" page.
"""
from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlencode, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from chalicelib.core.tokens import verifier
from chalicelib.identity.oauth.clients import get_client


def _b64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def hint_subject(id_token: str, client_id: str) -> str | None:
    """The ``sub`` of an ID token signed by one of our published keys for ``client_id`` (expiry ignored)."""
    try:
        header_b64, payload_b64, sig_b64 = id_token.split(".")
        header = json.loads(_b64(header_b64))
        if header.get("alg") != "RS256" or not isinstance(header.get("kid"), str):
            return None
        key = verifier().keyring.key(header["kid"])
        if key is None:
            return None
        key.prepared_key.verify(_b64(sig_b64), f"{header_b64}.{payload_b64}".encode("ascii"),
                                padding.PKCS1v15(), hashes.SHA256())
        claims = json.loads(_b64(payload_b64))
    except (ValueError, InvalidSignature, AttributeError, TypeError):
        return None
    aud = claims.get("aud")
    if client_id not in (aud if isinstance(aud, list) else [aud]) or not isinstance(claims.get("sub"), str):
        return None
    return str(claims["sub"])


def redirect_target(client_id: str, uri: str, state: str | None) -> str | None:
    """``uri`` (with ``state``) when it is at the origin of a registered redirect URI of the client."""
    client = get_client(client_id) if client_id else None
    if client is None or not uri:
        return None
    parts = urlsplit(uri)
    origin = (parts.scheme, parts.netloc)
    registered = {(urlsplit(u).scheme, urlsplit(u).netloc) for u in json.loads(client.redirect_uris or "[]")}
    if origin not in registered or parts.scheme not in ("http", "https"):
        return None
    return uri + (("&" if parts.query else "?") + urlencode({"state": state}) if state else "")


def end_session(query: dict[str, str], session: Any) -> tuple[bool, str | None]:
    """(whether the browser's session is to be ended, where to send the browser next)."""
    client_id = query.get("client_id") or ""
    subject = hint_subject(query.get("id_token_hint") or "", client_id)
    ends = session is not None and subject is not None and subject == session.user_id
    return ends, redirect_target(client_id, query.get("post_logout_redirect_uri") or "", query.get("state"))
