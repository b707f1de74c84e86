"""OAuth error answers (RFC 6749 section 5.2) and the token response shape.

The token, revocation and introspection endpoints answer errors as ``application/json``
``{"error", "error_description"}`` (strict clients such as openid-client refuse anything else); the
authorization endpoint's own 400s (unknown client, unregistered redirect URI) stay problem+json like
the REST APIs, because they are shown to a person, never parsed by a client.
"""
from __future__ import annotations

import json
from typing import Any

from chalice import Response

from chalicelib.core.http.errors import ApiError
from chalicelib.core.tenancy import endpoints_of

# The error codes of RFC 6749 section 5.2, RFC 7009 section 2.2.1, RFC 8693 section 2.2.2 and RFC 7591.
RFC_CODES = frozenset({
    "invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type",
    "invalid_scope", "unsupported_token_type", "invalid_target", "server_error", "temporarily_unavailable",
    "invalid_redirect_uri", "invalid_client_metadata",  # RFC 7591 section 3.2.2
})
# No cache may keep a token response or an error about one (RFC 6749 section 5.1).
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def oauth_error(status: int, error: str, description: str, **members: Any) -> ApiError:
    """An OAuth error: ``error`` doubles as the problem ``code``; ``members`` are extension members
    (for example ``reason="mfa_required"``) added to the error object."""
    return ApiError(status, error, description, extra={"error": error, "error_description": description, **members})


def invalid_client(description: str, realm: str = "token") -> ApiError:
    """A 401 ``invalid_client`` that asks for HTTP Basic client authentication."""
    err = oauth_error(401, "invalid_client", description)
    err.headers["WWW-Authenticate"] = f'Basic realm="{realm}"'
    return err


def rfc_code(err: ApiError) -> str:
    """The RFC 6749 code of any error raised behind an OAuth endpoint (a generic 4xx is ``invalid_request``)."""
    if err.code in RFC_CODES:
        return err.code
    if err.status >= 500:
        return "server_error"
    return "invalid_client" if err.status == 401 else "invalid_request"


def error_response(err: ApiError) -> Response:
    """The RFC 6749 section 5.2 answer: ``application/json`` with ``error`` and ``error_description``."""
    code = rfc_code(err)
    status = 400 if code == "invalid_request" and err.status in (403, 404, 409, 422) else err.status
    body: dict[str, Any] = {k: v for k, v in err.extra.items() if k not in ("error", "error_description")}
    body.update({"error": code, "error_description": err.detail})
    if err.code != code and "reason" not in body:
        body["reason"] = err.code  # the platform's finer code, e.g. body_too_large
    return Response(body=json.dumps(body), status_code=status,
                    headers={"Content-Type": "application/json", **NO_STORE, **err.headers})


def token_response(token: str, claims: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"access_token": token, "token_type": "Bearer", "expires_in": claims["exp"] - claims["iat"],
            "workspace_id": claims["workspace_id"], **endpoints_of(claims["workspace_id"]), **extra}
