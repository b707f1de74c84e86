"""Workspace routes: create, list, read, change; domain-join (user-level)."""
from __future__ import annotations

from typing import Any

from chalicelib.core.audit import Actor
from chalicelib.core.authz import AUTHENTICATED
from chalicelib.core.http import paging
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.validation import validate
from chalicelib.core.regions import GLOBAL, region_for
from chalicelib.core.store import idempotency
from chalicelib.platform.access import require_user_token
from chalicelib.platform.workspaces import domain_join
from chalicelib.platform.workspaces import service as svc

api = Api("platform")


def replayed_header(replayed: bool) -> dict[str, str]:
    return {"Idempotent-Replayed": "true"} if replayed else {}


@api.route("/v1/workspaces", methods=["POST"], permission=AUTHENTICATED, scope=GLOBAL)
def create_workspace(ctx: Ctx) -> Any:
    require_user_token(ctx.user)
    body = svc.validate_create(ctx.json())
    region = region_for(body["residency"])

    def work() -> tuple[int, Any]:
        ws = svc.create_workspace(owner_id=ctx.user.user_id, owner_email=ctx.user.email, name=body["name"].strip(),
                                  residency=body["residency"], enforce_mfa=body.get("enforce_mfa", False),
                                  caller=ctx.caller)
        return 201, {**svc.to_public(ws), "role": "admin", "token_exchange": svc.token_exchange_hint(ws.id)}

    status, result, replayed = idempotency.run(region, f"user:{ctx.user.user_id}", "workspaces.create",
                                               ctx.header(idempotency.HEADER), body, work)
    return json_response(result, status, {"Location": f"/v1/workspaces/{result['id']}", **replayed_header(replayed)})


@api.route("/v1/workspaces", permission=AUTHENTICATED, scope=GLOBAL)
def list_workspaces(ctx: Ctx) -> Any:
    paging.check_params(ctx.query, ("limit", "after"))
    return svc.list_for_user(ctx.user.user_id, paging.limit(ctx.query), paging.decode("workspaces", ctx.query.get("after")))


@api.route("/v1/workspaces/{workspace_id}", permission="workspace.read")
def get_workspace_route(ctx: Ctx, workspace_id: str) -> Any:
    paging.check_params(ctx.query, ())
    return svc.to_public(ctx.scope.entry())  # the path's workspace is the token's (checked by the route wrapper)


@api.route("/v1/workspaces/{workspace_id}", methods=["PATCH"], permission="workspace.update")
def patch_workspace(ctx: Ctx, workspace_id: str) -> Any:
    body = svc.validate_patch(ctx.json())
    domain = domain_join.verified_domain(ctx.user.user_id) if "domain_join" in body else None
    ws = svc.update_workspace(workspace_id, body, actor=Actor.of(ctx.user), amr=ctx.user.amr,
                              verified_email_domain=domain, caller=ctx.caller)
    return svc.to_public(ws)


@api.route("/v1/joinable-workspaces", permission=AUTHENTICATED, scope=GLOBAL)
def joinable_workspaces(ctx: Ctx) -> Any:
    require_user_token(ctx.user)
    paging.check_params(ctx.query, ())
    return {"workspaces": domain_join.joinable(ctx.user.user_id)}


@api.route("/v1/workspaces/{workspace_id}/join", methods=["POST"], permission=AUTHENTICATED, scope=GLOBAL)
def join_workspace(ctx: Ctx, workspace_id: str) -> Any:
    require_user_token(ctx.user)
    validate(ctx.json(required=False), {})
    return json_response(domain_join.join(workspace_id, ctx.user.user_id, caller=ctx.caller), 201)
