"""RFC 7662 token introspection (``/oauth2/introspect``, confidential clients only).

A client sees only its own tokens: those issued to it (``client_id``) or, for a client bound to a
workspace (``client_credentials``), tokens of that workspace. Every other token answers
``{"active": false}``, the same as an invalid one (RFC 7662 section 2.2 lets the server refuse).
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.http.errors import ApiError
from chalicelib.core.tokens import verifier
from chalicelib.identity.models import OAuthClientAttrs
from chalicelib.identity.oauth.errors import oauth_error

INTROSPECTED_CLAIMS = ("sub", "client_id", "scope", "workspace_id", "roles", "email", "amr", "iss", "aud", "exp",
                      "iat", "nbf", "jti")


def _visible_to(claims: dict[str, Any], client: OAuthClientAttrs) -> bool:
    if claims.get("client_id") == client.client_id:
        return True
    return bool(client.workspace_id) and claims.get("workspace_id") == client.workspace_id


def introspect(form: dict[str, str], client: OAuthClientAttrs) -> dict[str, Any]:
    """The claims of a valid token the client may see, ``{"active": false}`` for anything else; a
    request without ``token`` is 400 ``invalid_request`` (RFC 7662 section 2.1: it is REQUIRED)."""
    token = form.get("token") or ""
    if not token:
        raise oauth_error(400, "invalid_request", "token is required.")
    if len(token) > 8192:
        return {"active": False}
    try:
        claims = verifier().claims(token)
    except ApiError:
        return {"active": False}
    if not _visible_to(claims, client):
        return {"active": False}
    out: dict[str, Any] = {"active": True, "token_type": "Bearer"}
    out.update({k: claims[k] for k in INTROSPECTED_CLAIMS if k in claims})
    if "token_use" in claims:
        out["token_use"] = claims["token_use"]
    return out
