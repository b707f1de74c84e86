"""The OpenID Connect discovery document (``/.well-known/openid-configuration``), also served as the RFC 8414
authorization server metadata (``/.well-known/oauth-authorization-server``) that MCP clients read."""
from __future__ import annotations

from typing import Any

from chalicelib.core.config import settings
from chalicelib.core.regions import public_endpoints
from chalicelib.core.tokens import mcp_resources
from chalicelib.identity.oauth.authorize import SCOPES
from chalicelib.identity.oauth.token_endpoint import GRANTS

# Endpoints that exist, by discovery field (all served by ``oauth.routes``).
ENDPOINTS: dict[str, str] = {
    "jwks_uri": "/.well-known/jwks.json",
    "token_endpoint": "/oauth2/token",
    "introspection_endpoint": "/oauth2/introspect",
    "authorization_endpoint": "/oauth2/authorize",
    "userinfo_endpoint": "/userinfo",
    "revocation_endpoint": "/oauth2/revoke",
    "end_session_endpoint": "/oauth2/logout",
    "registration_endpoint": "/oauth2/register",  # RFC 7591 (oauth/registration/dynamic.py)
}


def discovery() -> dict[str, Any]:
    base = settings().auth_url
    doc: dict[str, Any] = {"issuer": settings().issuer}
    doc.update({name: base + path for name, path in ENDPOINTS.items()})
    doc.update({
        "grant_types_supported": sorted(GRANTS),
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
        "introspection_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": list(SCOPES),
        "client_id_metadata_document_supported": True,  # oauth/registration/metadata_documents.py
        "resource_parameter_supported": True,  # RFC 8707 (oauth/resources.py): the MCP endpoints
        "resource_indicators": sorted(mcp_resources()),
        "response_modes_supported": ["query"],
        "prompt_values_supported": ["none", "login", "consent", "select_account"],
        "authorization_response_iss_parameter_supported": True,
        "claims_parameter_supported": False,
        "request_parameter_supported": False,  # answered request_not_supported (oauth/authorize.py)
        "request_uri_parameter_supported": False,  # answered request_uri_not_supported
        "id_token_signing_alg_values_supported": ["RS256"],
        "subject_types_supported": ["public"],
        "response_types_supported": ["code"],
        "claims_supported": ["sub", "email", "email_verified", "name", "workspace_id", "roles", "amr", "iss", "aud",
                             "exp", "iat", "jti", "auth_time", "nonce", "at_hash", "azp", "sid"],
        "regional_endpoints": public_endpoints(),  # where each residency's workspaces are served
    })
    return doc
