"""Token revocation: single access tokens, sessions, grants, and RFC 7009 ``/oauth2/revoke``.

Revocations are markers in the ``revoked_tokens`` table that ``core.tokens`` reads (a revocation made in
this container applies from the next request, in another within ``core.tokens.REVOCATION_CACHE_SECONDS``). A session's
marker (``sid:<session_id>``) refuses every token of that session, exchanged ones included (they
carry its ``sid``); a grant's marker (``grant:<id>``) every token of that grant. Markers expire
(DynamoDB TTL) after the longest lifetime a token of theirs can have.
"""
from __future__ import annotations

from typing import Any

from pynamodb.exceptions import DoesNotExist

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError
from chalicelib.core.store.tables import global_model
from chalicelib.core.tokens import LEEWAY_SECONDS, revoke_key, verifier
from chalicelib.identity.models import (
    GRANT,
    REFRESH,
    FamilyAttrs,
    OAuthClientAttrs,
    RefreshAttrs,
    SessionAttrs,
    state_key,
)
from chalicelib.identity.oauth.clients import calling_client
from chalicelib.identity.oauth.errors import oauth_error
from chalicelib.identity.opaque import digest


def revoke_jti(jti: str, expires_at: float, reason: str, user_id: str | None) -> None:
    """Refuse one access token; ``user_id`` is its ``sub`` (None only for a service token)."""
    if float(expires_at) + LEEWAY_SECONDS <= clock.now():
        return  # already expired: nothing to refuse
    revoke_key(jti, expires_at, reason, user_id)


def token_user(claims: dict[str, Any]) -> str | None:
    """The user whose token these claims are (None for a service token, which belongs to its client)."""
    return None if claims.get("token_use") == "service" else str(claims["sub"])


def revoke_session_tokens(session_id: str, reason: str, user_id: str) -> None:
    """Refuse every token of the user's session (its grants' and exchanged ones included)."""
    revoke_key(f"sid:{session_id}", clock.now() + settings().max_api_token_ttl, reason, user_id)


def end_session(session_id: str, reason: str, user_id: str) -> None:
    """End a sign-in session: refuse every token issued in it and delete its record, so the browser's
    session cookie signs no one in any more (``/oauth2/authorize`` sends it to sign in again instead of
    issuing codes from it). Every path that ends a session comes here: sign-out, session revocation, and
    the reuse of a refresh token or authorization code (assumed theft)."""
    revoke_session_tokens(session_id, reason, user_id)
    cls = global_model(SessionAttrs)
    for record in cls.by_user.query(user_id, cls.session_id == session_id):
        cls(record.sid_hash).delete()


def revoke_family(family_id: str, reason: str) -> None:
    """Revoke a grant: its refresh tokens stop working and its access tokens are refused."""
    fam = global_model(FamilyAttrs)
    item = fam(state_key(GRANT, family_id))
    item.update(actions=[fam.revoked.set(True)])
    revoke_key(f"grant:{family_id}", clock.now() + settings().max_api_token_ttl, reason, item.user_id)
    for entry in item.issued or ():
        jti, _, exp = entry.partition("|")
        revoke_jti(jti, float(exp), reason, item.user_id)


def revoke(form: dict[str, str], client: OAuthClientAttrs | None) -> None:
    """RFC 7009: revoke a refresh token (its whole grant) or an access token issued to the calling client.

    Unknown, malformed or expired tokens are not an error (RFC 7009 section 2.2).
    """
    caller = calling_client(form, client)
    token = form.get("token") or ""
    if not token or len(token) > 8192:
        raise oauth_error(400, "invalid_request", "token is required.")
    if token.startswith("rt_"):
        try:
            item = global_model(RefreshAttrs).get(state_key(REFRESH, digest(token)), consistent_read=True)
        except DoesNotExist:
            return
        if item.client_id != caller.client_id:
            raise oauth_error(400, "invalid_request", "The token was not issued to this client.")
        revoke_family(item.family_id, "revoked_by_client")
        return
    try:
        claims = verifier().claims(token)
    except ApiError:
        return
    if claims.get("client_id") != caller.client_id:
        raise oauth_error(400, "invalid_request", "The token was not issued to this client.")
    revoke_jti(claims["jti"], claims["exp"], "revoked_by_client", token_user(claims))
