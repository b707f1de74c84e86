"""OAuth error answers (RFC 6749 section 5.2) and the token response shape."""
from __future__ import annotations

from typing import Any

from chalicelib.core.errors import ApiError
from chalicelib.core.tenancy import endpoints_of


def oauth_error(status: int, error: str, description: str) -> ApiError:
    """An OAuth error: ``error`` doubles as the problem ``code``."""
    return ApiError(status, error, description, extra={"error": error, "error_description": description})


def invalid_client(description: str, realm: str = "token") -> ApiError:
    """A 401 ``invalid_client`` that asks for HTTP Basic client authentication."""
    err = oauth_error(401, "invalid_client", description)
    err.headers["WWW-Authenticate"] = f'Basic realm="{realm}"'
    return err


def token_response(token: str, claims: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"access_token": token, "token_type": "Bearer", "expires_in": claims["exp"] - claims["iat"],
            "workspace_id": claims["workspace_id"], **endpoints_of(claims["workspace_id"]), **extra}
