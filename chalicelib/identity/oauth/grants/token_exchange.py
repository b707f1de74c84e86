"""RFC 8693 token exchange: trade a valid access token of the user for one of another workspace they belong to.

The exchanged token stays in the subject token's session and grant (``sid``, ``grant_id``, ``client_id``
are copied), so signing out, a password reset or a refresh-token reuse refuses it too, and it never
outlives the subject token (``exp`` <= the subject's ``exp``), so chained exchanges cannot extend a
session. Exchange is restricted to the platform's own clients: a subject token issued to an OAuth
client is exchanged only by that client (authenticated with HTTP Basic when confidential, named by
``client_id`` when public); no other client may exchange it. A token issued without a client (by the
platform itself) may not be exchanged by any OAuth client. A third-party client (``clients.is_first_party``)
may not exchange at all: the user allowed it one workspace at a time (``oauth/consent/``), and it asks for
another workspace with an authorization request.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core import clock
from chalicelib.core.authz import mfa_used
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError
from chalicelib.core.tenancy import get_workspace, roles_for
from chalicelib.core.tokens import verifier
from chalicelib.identity.models import OAuthClientAttrs
from chalicelib.identity.oauth.clients import get_client, is_first_party
from chalicelib.identity.oauth.errors import invalid_client, oauth_error, token_response
from chalicelib.identity.oauth.signing import PLATFORM_CLIENT_ID, issue_access_token

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
    if claims.get("token_use") in ("api", "service"):
        raise oauth_error(400, "invalid_grant", "API and service tokens are bound to one workspace and cannot be "
                                                "exchanged.")
    token_client = claims.get("client_id")
    _check_calling_client(form, client, None if token_client == PLATFORM_CLIENT_ID else token_client)
    owner = get_client(token_client) if token_client and token_client != PLATFORM_CLIENT_ID else None
    if owner is not None and not is_first_party(owner):
        raise oauth_error(400, "unauthorized_client", "A third-party application asks the user for another "
                                                      "workspace with an authorization request (workspace_id).")
    try:
        workspace = get_workspace(target)
        roles = roles_for(target, claims["sub"])
    except ApiError:
        roles = []
    if not roles:
        # RFC 8693 section 2.2.2: the target is not acceptable; the same answer whether it exists or not
        raise oauth_error(400, "invalid_target", "You are not a member of that workspace.")
    if workspace.enforce_mfa and not mfa_used(claims.get("amr", [])):
        raise oauth_error(400, "invalid_grant", "This workspace requires multi-factor authentication; "
                                                "sign in again with a second factor.", reason="mfa_required")
    ttl = min(settings().access_token_ttl, int(claims["exp"]) - int(clock.now()))
    if ttl <= 0:
        raise oauth_error(400, "invalid_grant", "The subject token is about to expire.")
    extra = {"client_id": claims["client_id"]} if claims.get("client_id") else None  # RFC 9068: kept
    token, new_claims = issue_access_token(
        user_id=claims["sub"], email=claims.get("email", ""), workspace_id=target, roles=roles,
        amr=list(claims.get("amr", [])), ttl=ttl, extra=extra, session_id=claims.get("sid"),
        grant_id=claims.get("grant_id"),
    )
    return token_response(token, new_claims, issued_token_type=ACCESS_TOKEN_TYPE)


def _check_calling_client(form: dict[str, str], client: OAuthClientAttrs | None, token_client: str | None) -> None:
    """Only the client the subject token was issued to may exchange it (none for a client-less token)."""
    named = form.get("client_id") or None
    if client is not None:
        caller: str | None = client.client_id
        if named and named != caller:
            raise invalid_client("client_id does not match the authenticated client.")
    elif named is not None:
        public = get_client(named)
        if public is None or public.confidential:
            raise invalid_client("Confidential clients authenticate with HTTP Basic.")
        caller = public.client_id
    else:
        caller = None
    if caller != token_client:
        raise oauth_error(400, "invalid_grant", "The subject token was not issued to this client.")
