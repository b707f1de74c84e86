"""The token endpoint's grants table: ``grant_type`` -> the grant's function, declared here explicitly."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalicelib.identity.models import OAuthClientAttrs
from chalicelib.identity.oauth.errors import oauth_error
from chalicelib.identity.oauth.grants import authorization_code, client_credentials, refresh_token, token_exchange

Grant = Callable[[dict[str, str], OAuthClientAttrs | None], dict[str, Any]]

GRANTS: dict[str, Grant] = {
    module.NAME: module.grant
    for module in (authorization_code, refresh_token, client_credentials, token_exchange)
}


def token(form: dict[str, str], client: OAuthClientAttrs | None) -> dict[str, Any]:
    """Answer a token request with the grant its ``grant_type`` names."""
    name = form.get("grant_type") or ""
    if not name:
        raise oauth_error(400, "invalid_request", "grant_type is required.")
    grant = GRANTS.get(name)
    if grant is None:
        raise oauth_error(400, "unsupported_grant_type", "The grant_type is not supported.")
    return grant(form, client)
