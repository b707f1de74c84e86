"""Authorization of platform calls beyond the token: the live role and user-level actions.

The route wrapper (``core.web``) has already replaced the token's roles with the caller's live membership
(``tenancy.live_principal``) and checked the route's permission; ``authorize`` adds the check that the
path names the token's own workspace, and the permission of the specific action.
"""
from __future__ import annotations

from dataclasses import replace

from chalicelib.core.authz import Principal, require, require_workspace
from chalicelib.core.authz import mfa_used as authz_mfa_used
from chalicelib.core.errors import ApiError, not_found
from chalicelib.core.tenancy import MembershipAttrs, membership


def authorize(principal: Principal, workspace_id: str, permission: str) -> MembershipAttrs:
    """The caller's live membership when it grants ``permission`` in the token's own workspace."""
    require_workspace(principal, workspace_id)
    m = principal.membership or membership(workspace_id, principal.user_id)
    if m is None:
        raise not_found("workspace")
    require(replace(principal, roles=(m.role,)), permission)
    return m


def require_user_token(principal: Principal) -> None:
    """User-level actions need the user's own sign-in token, not a workspace-bound API token, and never
    a service principal's (``client_credentials``) token."""
    if principal.claims.get("token_use") == "service":
        raise ApiError(403, "user_token_required", "A service token acts for its client, not for a user.")
    if principal.claims.get("token_use") == "api":
        raise ApiError(403, "user_token_required",
                       "API tokens are bound to one workspace; use a token from an interactive sign-in.")


def mfa_used(principal: Principal) -> bool:
    return authz_mfa_used(principal.amr)
