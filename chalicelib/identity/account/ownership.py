"""Which workspace may change an account's account-wide sign-in security (MFA reset, unlock).

Second factors and the lockout counter belong to the account, not to one workspace, so a workspace
Admin may change them only for an account that workspace owns: its e-mail domain is a domain the
workspace has verified (a verified SSO connection), or the workspace is the only one the account
belongs to (nobody else relies on those factors). Any other Admin is refused, so an Admin of one
tenant cannot weaken the account another tenant relies on.
"""
from __future__ import annotations

from chalicelib.core.http.errors import ApiError
from chalicelib.core.tenancy import workspaces_of
from chalicelib.identity.sso import connections


def owns_account(workspace_id: str, user_id: str, email: str) -> bool:
    domain = email.rsplit("@", 1)[-1].strip().lower()
    conn = connections.get(domain) if connections.DOMAIN_RE.match(domain) else None
    if conn is not None and conn.verified and conn.workspace_id == workspace_id:
        return True
    return [w["workspace_id"] for w in workspaces_of(user_id)] == [workspace_id]


def require_owner(workspace_id: str, user_id: str, email: str) -> None:
    """403 ``account_not_owned`` unless the workspace owns the account (see the module docstring)."""
    if not owns_account(workspace_id, user_id, email):
        raise ApiError(403, "account_not_owned",
                       "This account also belongs to other workspaces and its e-mail domain is not one this "
                       "workspace has verified: its sign-in security can only be changed by the account holder "
                       "or by the workspace that owns the domain.")
