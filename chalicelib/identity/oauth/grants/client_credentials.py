"""The ``client_credentials`` grant (RFC 6749 section 4.4): a confidential client's service principal.

Clients are bound by registration to one workspace; the token's ``sub`` is the client id, ``roles``
are the registered ones, ``amr`` is empty, ``token_use="service"``, ``client_id`` is set, and there is
no refresh token.
"""
from __future__ import annotations

import json
from typing import Any

from chalicelib.core.http.errors import ApiError
from chalicelib.core.tenancy import get_workspace
from chalicelib.identity.models import OAuthClientAttrs
from chalicelib.identity.oauth.errors import invalid_client, oauth_error, token_response
from chalicelib.identity.oauth.signing import issue_access_token

NAME = "client_credentials"


def grant(form: dict[str, str], client: OAuthClientAttrs | None) -> dict[str, Any]:
    if client is None:
        raise invalid_client("client_credentials needs a confidential client (HTTP Basic).")
    if form.get("client_id") and form["client_id"] != client.client_id:
        raise oauth_error(401, "invalid_client", "client_id does not match the authenticated client.")
    if "client_credentials" not in client.grants or not client.workspace_id:
        raise oauth_error(400, "unauthorized_client", "This client may not use the client_credentials grant.")
    try:
        get_workspace(client.workspace_id)
    except ApiError:
        raise oauth_error(400, "invalid_grant", "The client's workspace no longer exists.") from None
    roles = list(json.loads(client.service_roles or "[]"))
    token, claims = issue_access_token(user_id=client.client_id, email="", workspace_id=client.workspace_id,
                                       roles=roles, amr=[],
                                       extra={"token_use": "service", "client_id": client.client_id})
    return token_response(token, claims)
