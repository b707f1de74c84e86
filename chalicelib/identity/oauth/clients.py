"""Registered OAuth clients. Secrets are 256-bit random values stored as SHA-256 digests."""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from urllib.parse import unquote_plus

from pynamodb.exceptions import DoesNotExist

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.core.ids import new_id
from chalicelib.core.store.tables import global_model
from chalicelib.identity.models import OAuthClientAttrs
from chalicelib.identity.oauth.errors import invalid_client, oauth_error
from chalicelib.identity.oauth.registration import metadata_documents as client_metadata
from chalicelib.identity.oauth.registration.redirect_uris import redirect_uri_problem


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


DYNAMIC, METADATA_DOCUMENT, ADMIN = "dynamic", "metadata_document", "admin"  # how a client came to exist


def create_client(name: str, *, confidential: bool = True, grant_types: list[str] | None = None,
                  redirect_uris: list[str] | None = None, require_pkce: bool = False, first_party: bool = False,
                  registration: str = ADMIN) -> tuple[str, str | None]:
    """Register a client; returns ``(client_id, client_secret)`` (secret shown once, None if public)."""
    client_id = new_id("cli")
    secret = secrets.token_urlsafe(32) if confidential else None
    global_model(OAuthClientAttrs)(
        client_id, name=name, secret_hash=_digest(secret) if secret else None, confidential=confidential,
        grant_types=json.dumps(grant_types or []), redirect_uris=json.dumps(redirect_uris or []),
        created_at=clock.iso(), require_pkce=require_pkce or None, first_party=first_party or None,
        registration=registration,
    ).save()
    return client_id, secret


def is_first_party(client: OAuthClientAttrs) -> bool:
    """The platform's own clients (the web app, and clients an operator registered as first-party) never
    ask for consent; every other client does (``oauth/consent/``). Dynamic and metadata-document clients
    are never first-party, whatever they declare."""
    if client.registration in (DYNAMIC, METADATA_DOCUMENT) or client.client_id.startswith("https://"):
        return False
    return client.client_id == settings().app_client_id or bool(client.first_party)


SUPPORTED_GRANTS = ("authorization_code", "refresh_token", "client_credentials")


def register_client(name: str, *, confidential: bool, redirect_uris: list[str] | None = None,
                    grant_types: list[str] | None = None, workspace_id: str | None = None,
                    roles: list[str] | None = None, require_pkce: bool = False, first_party: bool = False,
                    registration: str = ADMIN) -> tuple[str, str | None]:
    """Register an OAuth client (tests, the demo seed, an Admin tool); ``(client_id, secret or None)``.

    A client is a third party (its users are asked for consent) unless ``first_party``: an operator
    registers the platform's own applications as first-party, never a client someone else runs.

    Public clients (no secret) may use ``authorization_code`` (+ ``refresh_token``) with PKCE only;
    confidential clients send PKCE when they like, and always when registered with ``require_pkce``;
    ``client_credentials`` needs a confidential client bound to one ``workspace_id`` with ``roles``.
    """
    grants = list(grant_types or ["authorization_code", "refresh_token"])
    unknown = [g for g in grants if g not in SUPPORTED_GRANTS]
    if unknown:
        raise ValueError(f"unsupported grant types: {unknown}")
    for uri in redirect_uris or []:
        problem = redirect_uri_problem(uri)
        if problem:
            raise ValueError(f"redirect URI {uri!r} {problem}")
    if "authorization_code" in grants and not redirect_uris:
        raise ValueError("authorization_code needs at least one redirect URI")
    if "client_credentials" in grants and (not confidential or not workspace_id or not roles):
        raise ValueError("client_credentials needs a confidential client with a workspace_id and roles")
    client_id, secret = create_client(name, confidential=confidential, grant_types=grants,
                                      redirect_uris=list(redirect_uris or []), require_pkce=require_pkce,
                                      first_party=first_party, registration=registration)
    if workspace_id:
        global_model(OAuthClientAttrs)(client_id).update(actions=[
            OAuthClientAttrs.workspace_id.set(workspace_id),
            OAuthClientAttrs.service_roles.set(json.dumps(list(roles or [])))])
    return client_id, secret


def get_client(client_id: str) -> OAuthClientAttrs | None:
    """A registered client, or the client a Client ID Metadata Document URL names (``registration/metadata_documents.py``)."""
    if isinstance(client_id, str) and client_id.startswith("https://"):
        return client_metadata.client(client_id)
    if not isinstance(client_id, str) or not client_id or len(client_id) > 64:
        return None
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
    if not sep:
        return None
    return _proven(client_id, secret)


def _proven(client_id: str, secret: str) -> OAuthClientAttrs | None:
    """The confidential client whose secret this is, or None (same cost for an unknown client)."""
    if not client_id or not secret or len(client_id) > 64 or len(secret) > 512:
        return None
    client = get_client(client_id)
    if client is None or not client.confidential or not client.secret_hash:
        # compare anyway so an unknown client costs the same as a wrong secret
        hmac.compare_digest(_digest(secret), "0" * 64)
        return None
    return client if hmac.compare_digest(_digest(secret), client.secret_hash) else None


def authenticate(authorization: str | None, form: dict[str, str]) -> OAuthClientAttrs | None:
    """The confidential client authenticated by ``client_secret_basic`` (HTTP Basic) or
    ``client_secret_post`` (``client_id`` + ``client_secret`` in the form), or None when the request
    carries no client secret (a public client names itself by ``client_id``).

    Credentials that are sent but wrong answer 401 ``invalid_client``; both methods at once answer
    400 ``invalid_request`` (RFC 6749 section 2.3: one method per request).
    """
    basic = bool(authorization) and str(authorization).lower().startswith("basic ")
    if "client_secret" in form:
        if basic:
            raise oauth_error(400, "invalid_request", "Use one client authentication method, not HTTP Basic and "
                                                      "client_secret together.")
        client = _proven(form.get("client_id", ""), form["client_secret"])
        if client is None:
            raise invalid_client("Client authentication failed.")
        return client
    if basic:
        client = authenticate_basic(authorization)
        if client is None:
            raise invalid_client("Client authentication failed.")
        return client
    return None


def calling_client(form: dict[str, str], client: OAuthClientAttrs | None) -> OAuthClientAttrs:
    """The client calling the token or revocation endpoint: authenticated by Basic (confidential) or
    named by ``client_id`` (public); a 401 ``invalid_client`` otherwise."""
    named = form.get("client_id")
    if client is not None:
        if named and named != client.client_id:
            raise oauth_error(401, "invalid_client", "client_id does not match the authenticated client.")
        return client
    public = get_client(named or "")
    if public is None or public.confidential:
        raise invalid_client("Client authentication failed (confidential clients authenticate with HTTP Basic "
                             "or client_secret_post).")
    return public
