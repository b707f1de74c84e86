"""Agent definition routes at {base_url}/v1/agents: Members and Admins write, every role reads.
The workspace is the token's own; an agent of another workspace answers 404."""
from __future__ import annotations

from typing import Any

from chalice import Response  # type: ignore[attr-defined]

from chalicelib import tool_catalog
from chalicelib.agents import definitions, memory
from chalicelib.agents.plan_schema import call_schema
from chalicelib.agents.tools import TOOLS
from chalicelib.core.http import paging
from chalicelib.core.http.api import Api, Ctx, json_response

api = Api("platform")


@api.route("/v1/agents", ["POST"], permission="agents.manage")
def create_agent(ctx: Ctx) -> Any:
    agent = definitions.create(ctx.scope, ctx.json(), caller=ctx.caller)
    return json_response(agent, 201, {"Location": f"/v1/agents/{agent['id']}"})


@api.route("/v1/agents", permission="agents.read")
def list_agents(ctx: Ctx) -> Any:
    paging.check_params(ctx.query, ("limit", "after"))
    return definitions.list_agents(ctx.scope, paging.limit(ctx.query, 25, 100),
                                   paging.decode("agents", ctx.query.get("after")))


@api.route("/v1/agents/tools", permission="agents.read")
def list_agent_tools(ctx: Ctx) -> Any:
    """The tools an agent may be given, from the platform's tool catalogue (the web app's builder reads it)."""
    return {"tools": [{"name": spec.name, "title": spec.title, "summary": spec.summary,
                       "description": spec.description, "permission": spec.permission, "writes": spec.writes,
                       "arguments": call_schema(TOOLS[spec.name])}
                      for spec in tool_catalog.on(tool_catalog.AGENTS)]}


@api.route("/v1/agents/{agent_id}", permission="agents.read")
def get_agent(ctx: Ctx, agent_id: str) -> Any:
    return definitions.to_public(definitions.get_item(ctx.scope, agent_id))


@api.route("/v1/agents/{agent_id}", ["PATCH"], permission="agents.manage")
def update_agent(ctx: Ctx, agent_id: str) -> Any:
    return definitions.update(ctx.scope, agent_id, ctx.json(), caller=ctx.caller)


@api.route("/v1/agents/{agent_id}", ["DELETE"], permission="agents.manage")
def delete_agent(ctx: Ctx, agent_id: str) -> Any:
    definitions.delete(ctx.scope, agent_id, caller=ctx.caller)
    return Response(body="", status_code=204, headers={"Cache-Control": "no-store"})


@api.route("/v1/agents/{agent_id}/memory", permission="agents.run")
def read_memory(ctx: Ctx, agent_id: str) -> Any:
    """What the agent remembers for the caller (never another user's memory)."""
    paging.check_params(ctx.query, ())
    definitions.get_item(ctx.scope, agent_id)
    return memory.read(ctx.scope.home, ctx.user.workspace_id, agent_id, ctx.user.user_id,
                       reader=ctx.scope)


@api.route("/v1/agents/{agent_id}/memory", ["DELETE"], permission="agents.run")
def forget_memory(ctx: Ctx, agent_id: str) -> Any:
    definitions.get_item(ctx.scope, agent_id)
    memory.forget(ctx.scope.home, ctx.user.workspace_id, agent_id, ctx.user.user_id)
    return Response(body="", status_code=204, headers={"Cache-Control": "no-store"})
