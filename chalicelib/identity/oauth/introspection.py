"""RFC 7662 token introspection (``/oauth2/introspect``, confidential clients only)."""
from __future__ import annotations

from typing import Any

from chalicelib.core.errors import ApiError
from chalicelib.core.tokens import verifier

INTROSPECTED_CLAIMS = ("sub", "workspace_id", "roles", "email", "amr", "iss", "aud", "exp", "iat", "nbf", "jti")


def introspect(token: str) -> dict[str, Any]:
    """The claims of a valid token, ``{"active": false}`` for anything else."""
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
