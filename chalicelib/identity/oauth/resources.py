"""RFC 8707 resource indicators: the ``resource`` an authorization or token request names.

The only resources the identity service issues audience-restricted tokens for are the regional MCP
endpoints (``core.tokens.mcp_resources``); a request without ``resource`` gets a ``service-api`` token
as before. A resource is compared exactly (scheme, host, port and path as published in each MCP
endpoint's protected resource metadata): no normalisation a client could use to name another address.
A grant keeps its resource: its code, its refresh tokens and every access token issued from them.
"""
from __future__ import annotations

from chalicelib.core.tokens import mcp_resources
from chalicelib.identity.oauth.errors import oauth_error

MAX_RESOURCE_LEN = 512


def resource_problem(value: str) -> str | None:
    """Why ``value`` is not a resource this service issues tokens for (None when it is one)."""
    if not value or len(value) > MAX_RESOURCE_LEN or value not in mcp_resources():
        return "resource must be the URL of one of this platform's MCP endpoints (see its protected resource metadata)."
    return None


def same_resource(granted: str | None, form: dict[str, str]) -> str | None:
    """The resource of a token request on an existing grant: the grant's own; naming another one is
    ``invalid_target`` (RFC 8707 section 2.2: a token request cannot widen or move the audience)."""
    if "resource" in form and form["resource"] != granted:
        raise oauth_error(400, "invalid_target", "resource must be the one the grant was authorized for.")
    return granted
