"""Token revocation: single access tokens (``revoked_tokens``), whole grants, and RFC 7009 ``/oauth2/revoke``.

A revoked jti is refused at once by this process (its revocation list is invalidated) and by every
other process within ``tokens.REVOCATION_REFRESH_SECONDS`` (30 s), the documented bound. The item
expires (DynamoDB TTL) with the token itself. Revoking a grant marks it revoked (its refresh tokens
stop working) and revokes every access token recorded in it.
"""
from __future__ import annotations

from pynamodb.exceptions import DoesNotExist

from chalicelib.core import clock
from chalicelib.core.errors import ApiError
from chalicelib.core.models import global_model
from chalicelib.core.tokens import LEEWAY_SECONDS, RevokedTokenAttrs, verifier
from chalicelib.identity.models import GRANT, REFRESH, FamilyAttrs, OAuthClientAttrs, RefreshAttrs, state_key
from chalicelib.identity.oauth.clients import calling_client
from chalicelib.identity.oauth.errors import oauth_error
from chalicelib.identity.opaque import digest


def revoke_jti(jti: str, expires_at: float, reason: str) -> None:
    if float(expires_at) + LEEWAY_SECONDS <= clock.now():
        return  # already expired: nothing to refuse
    global_model(RevokedTokenAttrs)(jti, expires_at=int(expires_at) + LEEWAY_SECONDS, reason=reason[:64]).save()
    verifier().revocations.invalidate()


def revoke_family(family_id: str, reason: str) -> None:
    """Revoke a grant: its refresh tokens stop working and its access tokens are refused."""
    fam = global_model(FamilyAttrs)
    item = fam(state_key(GRANT, family_id))
    item.update(actions=[fam.revoked.set(True)])
    for entry in item.issued or ():
        jti, _, exp = entry.partition("|")
        revoke_jti(jti, float(exp), reason)


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
    revoke_jti(claims["jti"], claims["exp"], "revoked_by_client")
