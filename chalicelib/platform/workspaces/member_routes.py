"""Member routes: list, change role, remove (Admin)."""
from __future__ import annotations

from typing import Any

from chalice import Response

from chalicelib.core.audit import Actor
from chalicelib.core.http import paging
from chalicelib.core.http.api import Api, Ctx
from chalicelib.core.http.validation import validate
from chalicelib.platform.workspaces import members

api = Api("platform")


@api.route("/v1/workspaces/{workspace_id}/members", permission="members.read")
def list_members(ctx: Ctx, workspace_id: str) -> Any:
    paging.check_params(ctx.query, ("limit", "after"))
    return members.list_members(ctx.scope, paging.limit(ctx.query), paging.decode("members", ctx.query.get("after")))


@api.route("/v1/workspaces/{workspace_id}/members/{user_id}", methods=["PATCH"], permission="members.manage")
def change_role(ctx: Ctx, workspace_id: str, user_id: str) -> Any:
    body = validate(ctx.json(), members.ROLE_FIELDS)
    m = members.change_role(ctx.scope, user_id, body["role"], actor=Actor.of(ctx.user), caller=ctx.caller)
    return members.to_public(m)


@api.route("/v1/workspaces/{workspace_id}/members/{user_id}", methods=["DELETE"], permission="members.manage")
def remove_member(ctx: Ctx, workspace_id: str, user_id: str) -> Any:
    members.remove_member(ctx.scope, user_id, actor=Actor.of(ctx.user), caller=ctx.caller)
    return Response(body="", status_code=204)
