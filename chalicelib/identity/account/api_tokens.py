"""User-created API tokens: JWTs from the same issuer (``token_use="api"``), one workspace each.

The JWT is shown once; the table keeps only its record (id = the token's ``jti``, name, workspace,
expiry, revocation time). Lifetime: 1 to 90 days (``settings().max_api_token_ttl``), default 30.
The token carries the user's roles in the workspace at creation time and the ``amr`` of the session
that created it (so an MFA-enforced workspace accepts it only when that session used MFA, and creating
one for such a workspace without MFA is refused). Revoking writes the jti to ``revoked_tokens``:
refused at once by the process that revoked it and by every other within 30 seconds.
"""
from __future__ import annotations

from pynamodb.exceptions import DoesNotExist

from chalicelib.core import clock
from chalicelib.core.authz import mfa_used
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError, not_found
from chalicelib.core.store import revocation_ledger
from chalicelib.core.store.tables import global_model
from chalicelib.core.tenancy import get_workspace, region_of
from chalicelib.identity import users as users_mod
from chalicelib.identity.models import ApiTokenAttrs
from chalicelib.identity.oauth.issuing import roles_for_safe
from chalicelib.identity.oauth.revocation import revoke_jti
from chalicelib.identity.oauth.signing import issue_access_token

DEFAULT_DAYS = 30
MAX_ACTIVE_PER_USER = 50
KEEP_AFTER_EXPIRY_SECONDS = 30 * 24 * 3600


def _model() -> type[ApiTokenAttrs]:
    return global_model(ApiTokenAttrs)


def max_days() -> int:
    return settings().max_api_token_ttl // 86400


def list_tokens(user_id: str) -> list[ApiTokenAttrs]:
    out = list(_model().by_user.query(user_id))
    out.sort(key=lambda t: t.created_at, reverse=True)
    return out


def create(user_id: str, amr: list[str], *, name: str, workspace_id: str, expires_in_days: int) -> tuple[str, ApiTokenAttrs]:
    """Issue an API token; returns the JWT (shown once) and its record."""
    roles = roles_for_safe(workspace_id, user_id)
    if not roles:
        raise not_found("workspace")
    if get_workspace(workspace_id).enforce_mfa and not mfa_used(amr):
        raise ApiError(403, "mfa_required", "This workspace requires multi-factor authentication: sign in with a "
                                            "second factor before creating an API token for it.")
    active = [t for t in list_tokens(user_id) if t.public()["status"] == "active"]
    if len(active) >= MAX_ACTIVE_PER_USER:
        raise ApiError(409, "too_many_tokens", f"At most {MAX_ACTIVE_PER_USER} active API tokens per user; revoke one.")
    user = users_mod.get_user(user_id)
    assert user is not None
    ttl = expires_in_days * 86400
    token, claims = issue_access_token(user_id=user_id, email=user.email, workspace_id=workspace_id, roles=roles,
                                       amr=amr, ttl=ttl, extra={"token_use": "api", "token_name": name})
    record = _model()(claims["jti"], user_id=user_id, name=name, workspace_id=workspace_id, roles=",".join(roles),
                      created_at=claims["iat"], expires_at=claims["exp"],
                      purge_at=claims["exp"] + KEEP_AFTER_EXPIRY_SECONDS)
    record.save()
    return token, record


def revoke(user_id: str, token_id: str) -> ApiTokenAttrs:
    """Revoke one of the user's tokens (404 for anyone else's)."""
    try:
        record = _model().get(token_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("API token") from None
    if record.user_id != user_id:
        raise not_found("API token")
    if not record.revoked_at:
        now = int(clock.now())
        record.update(actions=[ApiTokenAttrs.revoked_at.set(now)])
        revoke_jti(record.id, record.expires_at, revocation_ledger.API_TOKEN_REASON, record.user_id)
        revocation_ledger.record(region_of(record.workspace_id), record.workspace_id, revocation_ledger.API_TOKEN, record.id, clock.iso(now), user_id)
    return record
