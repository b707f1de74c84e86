"""Group routes: list, create, read, rename, delete groups and add or remove their members (Admin)."""
from __future__ import annotations

from typing import Any

from chalice import Response

from chalicelib.core.audit import Actor
from chalicelib.core.http import paging
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.validation import validate
from chalicelib.platform.workspaces import groups

api = Api("platform")
GROUPS = "/v1/workspaces/{workspace_id}/groups"


@api.route(GROUPS, permission="members.read")
def list_groups(ctx: Ctx, workspace_id: str) -> Any:
    paging.check_params(ctx.query, ("limit", "after"))
    return groups.list_groups(ctx.scope, paging.limit(ctx.query), paging.decode("groups", ctx.query.get("after")))


@api.route(GROUPS, methods=["POST"], permission="members.manage")
def create_group(ctx: Ctx, workspace_id: str) -> Any:
    body = validate(ctx.json(), groups.CREATE_FIELDS)
    g = groups.create_group(ctx.scope, body["name"], description=body.get("description", ""),
                            actor=Actor.of(ctx.user), caller=ctx.caller)
    return json_response(groups.to_public(g), 201)


@api.route(GROUPS + "/{group_id}", permission="members.read")
def get_group(ctx: Ctx, workspace_id: str, group_id: str) -> Any:
    return groups.to_public(groups.get_group(ctx.scope, group_id))


@api.route(GROUPS + "/{group_id}", methods=["PATCH"], permission="members.manage")
def update_group(ctx: Ctx, workspace_id: str, group_id: str) -> Any:
    body = validate(ctx.json(), groups.UPDATE_FIELDS)
    g = groups.editable(groups.get_group(ctx.scope, group_id))
    g = groups.update_group(ctx.scope, g, name=body.get("name"), description=body.get("description"),
                            actor=Actor.of(ctx.user), caller=ctx.caller)
    return groups.to_public(g)


@api.route(GROUPS + "/{group_id}", methods=["DELETE"], permission="members.manage")
def delete_group(ctx: Ctx, workspace_id: str, group_id: str) -> Any:
    g = groups.editable(groups.get_group(ctx.scope, group_id))
    groups.delete_group(ctx.scope, g, actor=Actor.of(ctx.user), caller=ctx.caller)
    return Response(body="", status_code=204)


@api.route(GROUPS + "/{group_id}/members", permission="members.read")
def list_members(ctx: Ctx, workspace_id: str, group_id: str) -> Any:
    paging.check_params(ctx.query, ("limit", "after"))
    return groups.list_members(ctx.scope, group_id, paging.limit(ctx.query),
                               paging.decode("group_members", ctx.query.get("after")))


@api.route(GROUPS + "/{group_id}/members/{user_id}", methods=["PUT"], permission="members.manage")
def add_member(ctx: Ctx, workspace_id: str, group_id: str, user_id: str) -> Any:
    g = groups.editable(groups.get_group(ctx.scope, group_id))
    added = groups.add_member(ctx.scope, g, user_id, actor=Actor.of(ctx.user), caller=ctx.caller) is not None
    return json_response({"group_id": g.group_id, "user_id": user_id, "added": added}, 201 if added else 200)


@api.route(GROUPS + "/{group_id}/members/{user_id}", methods=["DELETE"], permission="members.manage")
def remove_member(ctx: Ctx, workspace_id: str, group_id: str, user_id: str) -> Any:
    g = groups.editable(groups.get_group(ctx.scope, group_id))
    groups.remove_member(ctx.scope, g, user_id, actor=Actor.of(ctx.user), caller=ctx.caller)
    return Response(body="", status_code=204)
