"""Issuing a grant's tokens: the access token (recorded in its grant), the rotated refresh token and the
ID token. Every issue re-reads the user's roles in the workspace and refuses a workspace with
``enforce_mfa`` unless the sign-in's ``amr`` shows MFA (``core.authz.mfa_used``)."""
from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from pynamodb.exceptions import UpdateError

from chalicelib.core import clock
from chalicelib.core.authz import mfa_used
from chalicelib.core.config import AUDIENCE, settings
from chalicelib.core.http.errors import ApiError
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import global_model
from chalicelib.core.tenancy import get_workspace, roles_for
from chalicelib.core.tokens import current_epochs, is_revoked
from chalicelib.identity import users as users_mod
from chalicelib.identity.models import GRANT, REFRESH, FamilyAttrs, RefreshAttrs, state_key
from chalicelib.identity.oauth.errors import oauth_error, token_response
from chalicelib.identity.oauth.revocation import revoke_family, revoke_jti, token_user
from chalicelib.identity.oauth.signing import issue_access_token, signer
from chalicelib.identity.opaque import digest, new_secret


def roles_for_safe(workspace_id: str, user_id: str) -> list[str]:
    """Roles in the workspace; [] for a workspace that does not exist (same answer as non-member)."""
    try:
        return roles_for(workspace_id, user_id)
    except ApiError:
        return []


def _half_hash(token: str) -> str:
    d = hashlib.sha256(token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(d[: len(d) // 2]).rstrip(b"=").decode()


def _roles_and_check(user_id: str, workspace_id: str, amr: list[str]) -> list[str]:
    if not workspace_id:
        return []
    roles = roles_for_safe(workspace_id, user_id)
    if not roles:
        raise oauth_error(400, "invalid_grant", "The user is no longer a member of the workspace.")
    if get_workspace(workspace_id).enforce_mfa and not mfa_used(amr):
        raise oauth_error(400, "invalid_grant", "This workspace requires multi-factor authentication; the sign-in "
                                                "did not use a second factor.", reason="mfa_required")
    return roles


def _record_in_grant(family_id: str, claims: dict[str, Any]) -> None:
    """Record the access token in its grant, unless the grant was revoked meanwhile (then refuse it)."""
    fam = global_model(FamilyAttrs)
    try:
        fam(state_key(GRANT, family_id)).update(actions=[fam.issued.add({f"{claims['jti']}|{claims['exp']}"})],
                                                condition=fam.revoked.does_not_exist() & fam.pk.exists())
    except UpdateError as err:
        if condition_failed(err):
            revoke_jti(claims["jti"], claims["exp"], "family_revoked", token_user(claims))
            raise oauth_error(400, "invalid_grant", "This grant has been revoked.") from None
        raise


def _new_refresh_token(*, family_id: str, client_id: str, user_id: str, workspace_id: str, amr: list[str],
                       scope: str, auth_time: int, session_id: str, family_ends_at: int, user_epoch: int,
                       resource: str | None) -> str:
    rt = new_secret("rt_")
    global_model(RefreshAttrs)(state_key(REFRESH, digest(rt)), family_id=family_id, client_id=client_id,
                               user_id=user_id, workspace_id=workspace_id, amr_json=json.dumps(amr), scope=scope,
                               auth_time=auth_time, session_id=session_id, user_epoch=user_epoch,
                               resource=resource, expires_at=family_ends_at).save()
    return rt


def _id_token(*, user: users_mod.UserAttrs, client_id: str, scope: str, amr: list[str], auth_time: int,
              session_id: str, workspace_id: str, roles: list[str], nonce: str | None, access_token: str) -> str:
    now = int(clock.now())
    scopes = scope.split()
    id_claims: dict[str, Any] = {
        "iss": settings().issuer, "sub": user.id, "aud": client_id, "azp": client_id, "iat": now,
        "exp": now + settings().access_token_ttl, "auth_time": auth_time, "amr": amr,
        "at_hash": _half_hash(access_token), "sid": session_id, "workspace_id": workspace_id, "roles": roles,
    }
    if nonce:
        id_claims["nonce"] = nonce
    if "email" in scopes:
        id_claims.update({"email": user.email, "email_verified": bool(user.email_verified)})
    if "profile" in scopes and user.display_name:
        id_claims["name"] = user.display_name
    return signer().sign(id_claims, token_type="JWT")


def _check_grant_not_revoked(family_id: str, user_id: str, session_id: str, user_epoch: int | None) -> int:
    """Refuse (and revoke the grant) when its session was signed out or the user's tokens were revoked
    since the grant began (a password reset); returns the user's epoch to record in the grant."""
    epoch = current_epochs(user_id, "")[0]
    if is_revoked(f"sid:{session_id}") or (user_epoch is not None and epoch > user_epoch):
        revoke_family(family_id, "session_revoked")
        raise oauth_error(400, "invalid_grant", "The sign-in behind this grant has ended; sign in again.")
    return epoch if user_epoch is None else user_epoch


def issue(*, client_id: str, family_id: str, user_id: str, workspace_id: str, amr: list[str], scope: str,
          auth_time: int, session_id: str, nonce: str | None, refresh: bool, family_ends_at: int,
          user_epoch: int | None = None, resource: str | None = None) -> dict[str, Any]:
    """The token response of a grant: access token, refresh token when ``refresh``, ID token for ``openid``.

    ``user_epoch``: the user's revocation epoch recorded when the grant began (None for a new grant).
    ``resource``: the RFC 8707 resource of the grant (an MCP resource); its access tokens are for it alone.
    """
    user_epoch = _check_grant_not_revoked(family_id, user_id, session_id, user_epoch)
    roles = _roles_and_check(user_id, workspace_id, amr)
    user = users_mod.get_user(user_id)
    if user is None or user.status != "active":
        raise oauth_error(400, "invalid_grant", "The user account is not active.")
    token, claims = issue_access_token(user_id=user_id, email=user.email, workspace_id=workspace_id, roles=roles,
                                       amr=amr, extra={"client_id": client_id, "scope": scope},
                                       session_id=session_id, grant_id=family_id, audience=resource or AUDIENCE)
    _record_in_grant(family_id, claims)
    extra: dict[str, Any] = {"scope": scope}
    if refresh:
        extra["refresh_token"] = _new_refresh_token(
            family_id=family_id, client_id=client_id, user_id=user_id, workspace_id=workspace_id, amr=amr,
            scope=scope, auth_time=auth_time, session_id=session_id, family_ends_at=family_ends_at,
            user_epoch=user_epoch, resource=resource)
    if "openid" in scope.split():
        extra["id_token"] = _id_token(user=user, client_id=client_id, scope=scope, amr=amr, auth_time=auth_time,
                                      session_id=session_id, workspace_id=workspace_id, roles=roles, nonce=nonce,
                                      access_token=token)
    return token_response(token, claims, **extra)
