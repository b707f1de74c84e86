"""The OIDC UserInfo endpoint: the signed-in user behind an access token (never a service principal)."""
from __future__ import annotations

from typing import Any

from chalicelib.core.http.errors import ApiError
from chalicelib.core.tokens import verifier
from chalicelib.identity import users as users_mod


def _invalid_token(detail: str) -> ApiError:
    return ApiError(401, "invalid_token", detail, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})


def userinfo(access_token: str) -> dict[str, Any]:
    principal = verifier().principal(access_token)
    if principal.claims.get("token_use") == "service":
        raise _invalid_token("A service token has no user.")
    user = users_mod.get_user(principal.user_id)
    if user is None:
        raise _invalid_token("The token's user no longer exists.")
    out: dict[str, Any] = {"sub": user.id, "email": user.email, "email_verified": bool(user.email_verified),
                           "workspace_id": principal.workspace_id, "roles": list(principal.roles),
                           "amr": list(principal.amr)}
    if user.display_name:
        out["name"] = user.display_name
    return out
