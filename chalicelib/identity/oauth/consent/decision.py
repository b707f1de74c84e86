"""What the consent page shows (``view``) and what the user's answer does (``decide``).

Allow records the consent (``grants.record``) and runs the stored authorization request again, which now
issues the code; Deny sends the browser back to the client with ``access_denied``. Both consume the
request. The page states the client's name as the client declared it (dynamic and metadata-document
clients say who they are themselves), where the browser goes next, when the client was registered, the
workspace, the user's role there and what the client may do.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from chalicelib.core import audit
from chalicelib.core.http.errors import ApiError
from chalicelib.core.tenancy import get_workspace
from chalicelib.identity.models import OAuthClientAttrs, SessionAttrs
from chalicelib.identity.oauth import authorize
from chalicelib.identity.oauth.clients import ADMIN, DYNAMIC, METADATA_DOCUMENT, get_client, is_first_party
from chalicelib.identity.oauth.consent import grants, pending
from chalicelib.identity.oauth.issuing import roles_for_safe
from chalicelib.identity.users import get_user

SCOPE_TEXT = {
    "openid": "Know who you are (your user id on this platform)",
    "email": "See your e-mail address",
    "profile": "See your name",
    "offline_access": "Stay connected while you are away",
}


@dataclass(frozen=True)
class ConsentView:
    key: str
    client_name: str
    self_declared: bool
    registration: str  # how the client came to exist, in words
    redirect_host: str
    workspace: str
    role: str
    abilities: list[str]
    email: str


def _registration(client: OAuthClientAttrs) -> str:
    kind = client.registration or ADMIN
    if kind == DYNAMIC:
        return f"Registered itself on {client.created_at[:10]}"
    if kind == METADATA_DOCUMENT:
        return f"Describes itself at {client.client_id}"
    return f"Registered by an administrator on {client.created_at[:10]}"


def _abilities(client: OAuthClientAttrs, data: dict[str, Any], role: str) -> list[str]:
    where = (f"through the MCP endpoint {data['resource']}" if data.get("resource")
             else "through the platform API")
    acts = (f"Act as you in this workspace with your role ({role}): read and change what your role may, {where}"
            if role else f"Act as you {where} (you belong to no workspace yet: it may create one)")
    out = [acts] + [SCOPE_TEXT[s] for s in grants.rights(data["scopes"]) if s in SCOPE_TEXT]
    if "refresh_token" in client.grants:
        out.append("Keep this access for up to 30 days without asking you again (until you revoke it in your "
                   "security settings)")
    return out


def view(key: str, session: SessionAttrs | None) -> ConsentView | None:
    """The consent page of this session's pending request, or None (unknown, expired or someone else's)."""
    data = pending.peek(key, session)
    client = get_client(data["client_id"]) if data else None
    user = get_user(session.user_id) if session else None
    if data is None or client is None or user is None:
        return None
    workspace_id = data["workspace_id"]
    roles = roles_for_safe(workspace_id, user.id) if workspace_id else []
    workspace = get_workspace(workspace_id).name if workspace_id else "(no workspace)"
    role = ", ".join(roles)
    return ConsentView(key=key, client_name=client.name, self_declared=(client.registration or ADMIN) != ADMIN,
                       registration=_registration(client), redirect_host=urlsplit(data["redirect_uri"]).netloc,
                       workspace=workspace, role=role, abilities=_abilities(client, data, role), email=user.email)


def decide(key: str, allow: bool, session: SessionAttrs, caller: Any) -> str:
    """The user's answer; the URL the browser goes to next (the client's redirect URI)."""
    data = pending.take(key, session)
    client = get_client(data["client_id"]) if data else None
    user = get_user(session.user_id)
    if data is None or client is None or user is None:
        raise ApiError(400, "consent_request_expired", "This request expired or was already answered. Go back to "
                                                       "the application and start again.")
    if not allow:
        return authorize.access_denied(data["redirect_uri"], data["state"], "The user denied the request.")
    grants.record(audit.Actor("user", user.id, user.email), client, data["workspace_id"], data["scopes"],
                  data["resource"], redirect_uri=data["redirect_uri"], caller=caller)
    return authorize.authorize(data["params"], session, "/oauth2/authorize",
                               consented_workspace=data["workspace_id"]).location


def signin_client(return_to: str) -> tuple[str, bool, str] | None:
    """For the sign-in page: (name, self-declared, redirect host) of the third-party client whose authorization
    request ``return_to`` continues, when its ``redirect_uri`` is registered; None otherwise."""
    parts = urlsplit(return_to)
    if parts.path != "/oauth2/authorize" or parts.scheme or parts.netloc:
        return None
    params = dict(parse_qsl(parts.query))
    client = get_client(params.get("client_id", ""))
    redirect_uri = params.get("redirect_uri", "")
    if client is None or is_first_party(client) or redirect_uri not in client.redirects:
        return None
    return client.name, (client.registration or ADMIN) != ADMIN, urlsplit(redirect_uri).netloc
