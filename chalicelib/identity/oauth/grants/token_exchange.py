"""RFC 8693 token exchange: trade a valid access token of the user for one of another workspace they belong to."""
from __future__ import annotations

from typing import Any

from chalicelib.core.authz import mfa_used
from chalicelib.core.errors import ApiError
from chalicelib.core.tenancy import get_workspace, roles_for
from chalicelib.core.tokens import verifier
from chalicelib.identity.models import OAuthClientAttrs
from chalicelib.identity.oauth.errors import oauth_error, token_response
from chalicelib.identity.oauth.signing import issue_access_token

NAME = "urn:ietf:params:oauth:grant-type:token-exchange"
TOKEN_EXCHANGE = NAME
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


def grant(form: dict[str, str], client: OAuthClientAttrs | None) -> dict[str, Any]:
    if form.get("subject_token_type") != ACCESS_TOKEN_TYPE:
        raise oauth_error(400, "invalid_request", f"subject_token_type must be {ACCESS_TOKEN_TYPE}.")
    subject_token = form.get("subject_token") or ""
    target = form.get("workspace_id") or ""
    if not subject_token or not target:
        raise oauth_error(400, "invalid_request", "subject_token and workspace_id are required.")
    try:
        claims = verifier().claims(subject_token)
    except ApiError:
        raise oauth_error(400, "invalid_grant", "The subject token is not valid.") from None
    if claims.get("token_use") == "api":
        raise oauth_error(400, "invalid_grant", "API tokens are bound to one workspace and cannot be exchanged.")
    try:
        workspace = get_workspace(target)
        roles = roles_for(target, claims["sub"])
    except ApiError:
        roles = []
    if not roles:
        # the same answer whether the workspace exists or not
        raise oauth_error(403, "access_denied", "You are not a member of that workspace.")
    if workspace.enforce_mfa and not mfa_used(claims.get("amr", [])):
        raise oauth_error(403, "mfa_required", "This workspace requires multi-factor authentication; "
                                                "sign in again with a second factor.")
    token, new_claims = issue_access_token(
        user_id=claims["sub"], email=claims.get("email", ""), workspace_id=target, roles=roles,
        amr=list(claims.get("amr", [])),
    )
    return token_response(token, new_claims, issued_token_type=ACCESS_TOKEN_TYPE)
