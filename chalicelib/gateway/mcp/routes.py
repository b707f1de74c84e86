"""The remote MCP server at {gateway_url}/mcp (Streamable HTTP, stateless JSON) and its OAuth 2.1 protected
resource metadata (RFC 9728) at {gateway_url}/.well-known/oauth-protected-resource/mcp.

The endpoint is a resource server of the identity service: it accepts only access tokens issued for its
own resource (RFC 8707 ``resource`` = ``{gateway_url}/mcp``; ``core.tokens.MCP``), never the platform
API's, and passes every request through ``core.http.api.authorize`` (421 for another region's workspace,
the caller's live membership, ``enforce_mfa``). A 401 names the metadata in ``WWW-Authenticate``; a
workspace that enforces MFA answers a token without a second factor with the step-up challenge
``insufficient_scope`` (scope ``mfa``).
"""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.core.config import settings
from chalicelib.core.http.api import REALM, Api, Ctx, json_response, problem_response
from chalicelib.core.http.errors import ApiError
from chalicelib.core.tokens import MCP, mcp_resource

api = Api("gateway")
MCP_DOOR = "workspace.read"  # any live member; each tool checks its operation's own permission
METADATA_PATH = "/.well-known/oauth-protected-resource/mcp"
SIGN_IN_SCOPE = "openid offline_access"  # what a client asks for at its first sign-in
STEP_UP_SCOPE = "mfa"


def resource_metadata_url() -> str:
    return settings().gateway_url + METADATA_PATH


def protected_resource_metadata() -> dict[str, Any]:
    """RFC 9728 metadata: this resource, the identity service that issues its tokens, how to send them."""
    return {"resource": mcp_resource(), "authorization_servers": [settings().issuer],
            "bearer_methods_supported": ["header"], "resource_signing_alg_values_supported": ["RS256"],
            "scopes_supported": ["openid", "offline_access", STEP_UP_SCOPE],
            "resource_name": "AI platform data gateway (MCP)",
            "resource_documentation": settings().gateway_url + "/v1/openapi.json"}


def _challenge(**params: str) -> str:
    fields = {"realm": REALM, **params, "resource_metadata": resource_metadata_url()}
    return "Bearer " + ", ".join(f'{k}="{v}"' for k, v in fields.items())


def http_error(err: ApiError) -> Response:
    """The MCP endpoint's HTTP-level refusals (before any JSON-RPC): RFC 6750 challenges naming the
    resource metadata, the step-up for ``mfa_required``, problem+json bodies."""
    if err.status == 401:
        sent = "error=" in err.headers.get("WWW-Authenticate", "")
        params = {"error": "invalid_token", "error_description": err.detail} if sent else {}
        err.headers["WWW-Authenticate"] = _challenge(**params, scope=SIGN_IN_SCOPE)
    elif err.status == 403 and err.code == "mfa_required":
        err.headers["WWW-Authenticate"] = _challenge(
            error="insufficient_scope", scope=f"{SIGN_IN_SCOPE} {STEP_UP_SCOPE}",
            error_description="This workspace requires a sign-in with a second factor.")
    return problem_response(err)


def _origin_allowed(origin: str | None) -> bool:
    """Streamable HTTP: a browser's cross-origin request is refused (DNS rebinding); tools send no Origin."""
    if not origin:
        return True
    allowed = {settings().gateway_url, settings().app_url}
    return any(urlsplit(origin)._replace(path="").geturl() == urlsplit(a)._replace(path="").geturl() for a in allowed)


def _discovery(ctx: Ctx) -> bool:
    from chalicelib.gateway.mcp import protocol  # noqa: PLC0415 - pydantic and the MCP types load at the first call

    return protocol.is_discovery(ctx.raw_body())


@api.route("/mcp", ["POST"], permission=MCP_DOOR, audience=MCP, render_error=http_error, anonymous=_discovery)
def mcp_post(ctx: Ctx) -> Response:
    """Every method acts for the token's user through the one authorization path, except ``server/discover``:
    it describes the server (versions, capabilities), the same for every caller, so a client's probe is
    answered before its sign-in (docs/decisions.md, "MCP server")."""
    if not _origin_allowed(ctx.header("origin")):
        raise ApiError(403, "origin_not_allowed", "Requests from this origin are not accepted.")
    from chalicelib.gateway.mcp import protocol  # noqa: PLC0415 - pydantic and the MCP types load at the first call

    headers = {k.lower(): v for k, v in ctx.request.headers.items()}
    answer = protocol.handle(ctx.raw_body(), headers, ctx.principal, ctx.request, ctx.caller)
    if answer.message is None:
        return Response(body="", status_code=202, headers={"Cache-Control": "no-store"})
    extra = {"MCP-Protocol-Version": answer.protocol_version} if answer.protocol_version else {}
    return Response(body=json.dumps(answer.message, separators=(",", ":"), default=str),
                    status_code=answer.status, headers={"Content-Type": "application/json", "Cache-Control": "no-store",
                                                        **extra})


@api.route("/mcp", ["GET", "DELETE"], public=True)
def mcp_no_stream(ctx: Ctx) -> Response:
    """Stateless: no server-to-client stream (GET) and no session to end (DELETE)."""
    raise ApiError(405, "method_not_allowed", "This MCP endpoint is stateless: send each JSON-RPC request as a POST.",
                   headers={"Allow": "POST"})


@api.route(METADATA_PATH, public=True)
def resource_metadata(ctx: Ctx) -> Response:
    return json_response(protected_resource_metadata(), headers={"Cache-Control": "public, max-age=300"})
