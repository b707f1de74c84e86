"""Dynamic client registration (RFC 7591) at ``/oauth2/register``: how an MCP client that has no Client ID
Metadata Document registers itself (``metadata_documents.py`` is the preferred way).

What a registration may ask for (anything else is refused with ``invalid_client_metadata``, nothing stored):

* ``redirect_uris`` (1 to 10): absolute https URLs, or http on a loopback host (native apps, RFC 8252),
  without fragment or wildcard; checked by ``redirect_uris.redirect_uri_problem`` (``invalid_redirect_uri``).
* ``grant_types``: ``authorization_code`` and optionally ``refresh_token`` (no client credentials: a
  self-registered client never acts as a service principal of a workspace).
* ``response_types``: ``code``. ``token_endpoint_auth_method``: ``none`` (a public client: PKCE is then
  always required), ``client_secret_basic`` or ``client_secret_post`` (the secret is shown once).
* ``client_name``: shown on the consent page marked as self-declared (``oauth/consent/``): a dynamically
  registered client is always a third party and gets a code only after the user allowed it; other RFC
  7591 metadata is ignored.

Registrations are limited per source address (``REGISTER_PER_IP``).
"""
from __future__ import annotations

from typing import Any

from chalicelib.core import clock
from chalicelib.identity.oauth.clients import DYNAMIC, register_client
from chalicelib.identity.oauth.errors import oauth_error
from chalicelib.identity.oauth.registration.redirect_uris import redirect_uri_problem
from chalicelib.identity.signin import limits

REGISTER_PER_IP = limits.Limit("register-ip", 30, 3600)
MAX_REDIRECTS = 10
MAX_NAME = 100
AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")
GRANTS = ("authorization_code", "refresh_token")


def _metadata_error(description: str) -> Exception:
    return oauth_error(400, "invalid_client_metadata", description)


def _string_list(body: dict[str, Any], name: str, default: list[str]) -> list[str]:
    value = body.get(name, default)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _metadata_error(f"{name} must be a list of strings.")
    return list(dict.fromkeys(value))


def register(body: Any, ip: str) -> dict[str, Any]:
    """Register a client from its RFC 7591 metadata; the RFC 7591 section 3.2.1 answer."""
    if not isinstance(body, dict):
        raise _metadata_error("The registration request must be a JSON object.")
    redirects = _string_list(body, "redirect_uris", [])
    if not 1 <= len(redirects) <= MAX_REDIRECTS:
        raise oauth_error(400, "invalid_redirect_uri", f"redirect_uris must list 1 to {MAX_REDIRECTS} URLs.")
    for uri in redirects:
        problem = redirect_uri_problem(uri) if len(uri) <= 512 else "is too long"
        if problem:
            raise oauth_error(400, "invalid_redirect_uri", f"A redirect URI {problem}.")
    grants = _string_list(body, "grant_types", ["authorization_code"])
    if "authorization_code" not in grants or set(grants) - set(GRANTS):
        raise _metadata_error("grant_types must be authorization_code, optionally with refresh_token.")
    if set(_string_list(body, "response_types", ["code"])) != {"code"}:
        raise _metadata_error("response_types must be [\"code\"].")
    method = body.get("token_endpoint_auth_method", "client_secret_basic")
    if method not in AUTH_METHODS:
        raise _metadata_error("token_endpoint_auth_method must be one of " + ", ".join(AUTH_METHODS) + ".")
    name = body.get("client_name", "MCP client")
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= MAX_NAME:
        raise _metadata_error(f"client_name must be a string of 1 to {MAX_NAME} characters.")
    limits.hit(REGISTER_PER_IP, ip)
    client_id, secret = register_client(name.strip(), confidential=method != "none", redirect_uris=redirects,
                                        grant_types=grants, require_pkce=True, registration=DYNAMIC)
    out: dict[str, Any] = {"client_id": client_id, "client_id_issued_at": int(clock.now()),
                           "client_name": name.strip(), "redirect_uris": redirects, "grant_types": grants,
                           "response_types": ["code"], "token_endpoint_auth_method": method}
    if secret:
        out.update({"client_secret": secret, "client_secret_expires_at": 0})
    return out
