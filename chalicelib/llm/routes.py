"""Model selector routes at {base_url}/v1 (platform group). Thin: every view calls a service."""
from __future__ import annotations

from typing import Any

from chalicelib.core.http.api import Api, Ctx
from chalicelib.llm import access, service

api = Api("platform")


@api.route("/v1/models", permission="chat.use")
def list_models(ctx: Ctx) -> dict[str, Any]:
    return service.available(ctx.user)


@api.route("/v1/models/allow-list", permission="workspace.update")
def get_allow_list(ctx: Ctx) -> dict[str, Any]:
    return {"roles": access.allow_list(ctx.user.workspace_id)}


@api.route("/v1/models/allow-list", ["PUT"], permission="workspace.update")
def put_allow_list(ctx: Ctx) -> dict[str, Any]:
    return access.set_allow_list(ctx.user, ctx.json(), caller=ctx.caller)
