"""Model selector routes at {base_url}/v1 (platform group). Thin: every view calls a service."""
from __future__ import annotations

from typing import Any

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.llm import access, budget, connections, service

api = Api("platform")


@api.route("/v1/models", permission="chat.use")
def list_models(ctx: Ctx) -> dict[str, Any]:
    return service.available(ctx.scope)


@api.route("/v1/models/allow-list", permission="workspace.update")
def get_allow_list(ctx: Ctx) -> dict[str, Any]:
    return {"roles": access.allow_list(ctx.scope)}


@api.route("/v1/models/allow-list", ["PUT"], permission="workspace.update")
def put_allow_list(ctx: Ctx) -> dict[str, Any]:
    return access.set_allow_list(ctx.scope, ctx.json(), caller=ctx.caller)


@api.route("/v1/models/budget", permission="workspace.update")
def get_budget(ctx: Ctx) -> dict[str, Any]:
    return budget.get(ctx.scope)


@api.route("/v1/models/budget", ["PUT"], permission="workspace.update")
def put_budget(ctx: Ctx) -> dict[str, Any]:
    return budget.put(ctx.scope, ctx.json(), caller=ctx.caller)


@api.route("/v1/models/connections", permission="workspace.update")
def list_connections(ctx: Ctx) -> dict[str, Any]:
    return connections.list_connections(ctx.scope)


@api.route("/v1/models/connections", ["POST"], permission="workspace.update")
def create_connection(ctx: Ctx) -> Response:
    return json_response(connections.create(ctx.scope, ctx.json(), caller=ctx.caller), 201)


@api.route("/v1/models/connections/{name}", permission="workspace.update")
def read_connection(ctx: Ctx, name: str) -> dict[str, Any]:
    return connections.get_connection(ctx.scope, name)


@api.route("/v1/models/connections/{name}", ["PATCH"], permission="workspace.update")
def update_connection(ctx: Ctx, name: str) -> dict[str, Any]:
    return connections.update(ctx.scope, name, ctx.json(), caller=ctx.caller)


@api.route("/v1/models/connections/{name}", ["DELETE"], permission="workspace.update")
def delete_connection(ctx: Ctx, name: str) -> Response:
    connections.delete(ctx.scope, name, caller=ctx.caller)
    return Response(body="", status_code=204)


@api.route("/v1/models/connections/{name}/test", ["POST"], permission="workspace.update")
def test_connection(ctx: Ctx, name: str) -> dict[str, Any]:
    return connections.test(ctx.scope, name, caller=ctx.caller)
