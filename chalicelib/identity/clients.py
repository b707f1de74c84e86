"""Registered OAuth clients. Secrets are 256-bit random values stored as SHA-256 digests."""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from urllib.parse import unquote_plus

from pynamodb.attributes import BooleanAttribute, UnicodeAttribute
from pynamodb.exceptions import DoesNotExist

from chalicelib.core import clock
from chalicelib.core.ids import new_id
from chalicelib.core.models import BaseModel, global_model


class OAuthClientAttrs(BaseModel):
    TABLE = "oauth_clients"
    client_id = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute()
    secret_hash = UnicodeAttribute(null=True)  # None for public clients
    confidential = BooleanAttribute(default=True)
    grant_types = UnicodeAttribute(default="[]")  # JSON list
    redirect_uris = UnicodeAttribute(default="[]")  # JSON list, matched exactly
    created_at = UnicodeAttribute()


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_client(name: str, *, confidential: bool = True, grant_types: list[str] | None = None,
                  redirect_uris: list[str] | None = None) -> tuple[str, str | None]:
    """Register a client; returns ``(client_id, client_secret)`` (secret shown once, None if public)."""
    client_id = new_id("cli")
    secret = secrets.token_urlsafe(32) if confidential else None
    global_model(OAuthClientAttrs)(
        client_id, name=name, secret_hash=_digest(secret) if secret else None, confidential=confidential,
        grant_types=json.dumps(grant_types or []), redirect_uris=json.dumps(redirect_uris or []),
        created_at=clock.iso(),
    ).save()
    return client_id, secret


def get_client(client_id: str) -> OAuthClientAttrs | None:
    try:
        return global_model(OAuthClientAttrs).get(client_id)
    except DoesNotExist:
        return None


def authenticate_basic(authorization: str | None) -> OAuthClientAttrs | None:
    """The confidential client proven by an HTTP Basic header, or None."""
    if not authorization or not authorization.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    client_id, sep, secret = decoded.partition(":")
    client_id, secret = unquote_plus(client_id), unquote_plus(secret)  # RFC 6749 section 2.3.1
    if not sep or not client_id or not secret or len(client_id) > 64:
        return None
    client = get_client(client_id)
    if client is None or not client.confidential or not client.secret_hash:
        # compare anyway so an unknown client costs the same as a wrong secret
        hmac.compare_digest(_digest(secret), "0" * 64)
        return None
    return client if hmac.compare_digest(_digest(secret), client.secret_hash) else None
