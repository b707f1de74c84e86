"""Token endpoint grants, introspection (RFC 7662) and the discovery document.

Grants are dispatched by ``grant_type`` from ``GRANTS``; each takes the form fields and the
authenticated client (or None) and returns the token response.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalicelib.core.authz import mfa_used
from chalicelib.core.config import settings
from chalicelib.core.errors import ApiError
from chalicelib.core.regions import public_endpoints
from chalicelib.core.tenancy import endpoints_of, get_workspace, roles_for
from chalicelib.core.tokens import verifier
from chalicelib.identity.clients import OAuthClientAttrs
from chalicelib.identity.signing import issue_access_token

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


def oauth_error(status: int, error: str, description: str) -> ApiError:
    """An OAuth error (RFC 6749 section 5.2): ``error`` doubles as the problem ``code``."""
    return ApiError(status, error, description, extra={"error": error, "error_description": description})


def token_response(token: str, claims: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"access_token": token, "token_type": "Bearer", "expires_in": claims["exp"] - claims["iat"],
            "workspace_id": claims["workspace_id"], **endpoints_of(claims["workspace_id"]), **extra}


def exchange(form: dict[str, str], client: OAuthClientAttrs | None) -> dict[str, Any]:
    """RFC 8693: trade a valid access token of the user for one of another workspace they belong to."""
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




GRANTS: dict[str, Callable[[dict[str, str], OAuthClientAttrs | None], dict[str, Any]]] = {
    TOKEN_EXCHANGE: exchange,
}

INTROSPECTED_CLAIMS = ("sub", "workspace_id", "roles", "email", "amr", "iss", "aud", "exp", "iat", "nbf", "jti")


def introspect(token: str) -> dict[str, Any]:
    """RFC 7662 answer: the claims of a valid token, ``{"active": false}`` for anything else."""
    if not token:
        return {"active": False}
    try:
        claims = verifier().claims(token)
    except ApiError:
        return {"active": False}
    out: dict[str, Any] = {"active": True, "token_type": "Bearer"}
    out.update({k: claims[k] for k in INTROSPECTED_CLAIMS if k in claims})
    if "token_use" in claims:
        out["token_use"] = claims["token_use"]
    return out


# Endpoints that exist, by discovery field; other modules add theirs when they register routes.
ENDPOINTS: dict[str, str] = {
    "jwks_uri": "/.well-known/jwks.json",
    "token_endpoint": "/oauth2/token",
    "introspection_endpoint": "/oauth2/introspect",
}


def discovery() -> dict[str, Any]:
    base = settings().auth_url
    doc: dict[str, Any] = {"issuer": settings().issuer}
    doc.update({name: base + path for name, path in ENDPOINTS.items()})
    doc.update({
        "grant_types_supported": sorted(GRANTS),
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"],
        "introspection_endpoint_auth_methods_supported": ["client_secret_basic"],
        "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "none"],
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": ["openid", "email", "profile", "offline_access"],
        "response_modes_supported": ["query"],
        "prompt_values_supported": ["none", "login", "consent", "select_account"],
        "authorization_response_iss_parameter_supported": True,
        "claims_parameter_supported": False,
        "request_parameter_supported": False,
        "id_token_signing_alg_values_supported": ["RS256"],
        "subject_types_supported": ["public"],
        "response_types_supported": ["code"],
        "claims_supported": ["sub", "email", "email_verified", "name", "workspace_id", "roles", "amr", "iss", "aud",
                             "exp", "iat", "jti", "auth_time", "nonce", "at_hash", "azp", "sid"],
           "regional_endpoints": public_endpoints(),  # where each residency's workspaces are served
    })
    return doc


# The OAuth/OIDC provider's grants (in ``provider``, which imports this module: bound lazily).
def _provider_grant(name: str) -> Callable[[dict[str, str], OAuthClientAttrs | None], dict[str, Any]]:
    def grant(form: dict[str, str], client: OAuthClientAttrs | None) -> dict[str, Any]:
        from chalicelib.identity import provider

        return getattr(provider, name)(form, client)  # type: ignore[no-any-return]

    grant.__name__ = name
    return grant


GRANTS.update({
    "authorization_code": _provider_grant("grant_authorization_code"),
    "refresh_token": _provider_grant("grant_refresh_token"),
    "client_credentials": _provider_grant("grant_client_credentials"),
})
ENDPOINTS.update({
    "authorization_endpoint": "/oauth2/authorize",
    "userinfo_endpoint": "/userinfo",
    "revocation_endpoint": "/oauth2/revoke",
    "end_session_endpoint": "/oauth2/logout",
})
