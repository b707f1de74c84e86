"""Authorization of platform calls beyond the route's permission: user-level actions and MFA.

The route wrapper (``core.http.api``) has already replaced the token's roles with the caller's live membership
(``tenancy.live_principal``), checked the route's permission, and checked that a ``{workspace_id}`` in the
path is the token's own workspace with the caller a member there (``tenancy.require_member``).
"""
from __future__ import annotations

from chalicelib.core.authz import Principal
from chalicelib.core.authz import mfa_used as authz_mfa_used
from chalicelib.core.http.errors import ApiError


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
