"""The Admin's SCIM token routes: create (the secret is shown once), list, revoke."""
from __future__ import annotations

from typing import Any

from chalice import Response

from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.validation import validate
from chalicelib.platform.scim import tokens

api = Api("platform")
TOKENS = "/v1/workspaces/{workspace_id}/scim/tokens"


@api.route(TOKENS, permission="sso.manage")
def list_tokens(ctx: Ctx, workspace_id: str) -> Any:
    return tokens.list_tokens(ctx.scope)


@api.route(TOKENS, methods=["POST"], permission="sso.manage")
def create_token(ctx: Ctx, workspace_id: str) -> Any:
    body = validate(ctx.json(required=False), tokens.CREATE_FIELDS)
    return json_response(tokens.create(ctx.scope, body.get("name"), caller=ctx.caller), 201)


@api.route(TOKENS + "/{token_id}", methods=["DELETE"], permission="sso.manage")
def revoke_token(ctx: Ctx, workspace_id: str, token_id: str) -> Any:
    tokens.revoke(ctx.scope, token_id, caller=ctx.caller)
    return Response(body="", status_code=204)
