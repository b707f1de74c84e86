"""Support access: grants managed by Admins; reads by support staff holding a live grant."""
from __future__ import annotations

from typing import Any

from chalicelib.core.audit import Actor
from chalicelib.core.authz import AUTHENTICATED
from chalicelib.core.http import paging
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.validation import validate
from chalicelib.core.regions import GLOBAL, PATH
from chalicelib.platform.audit import query as audit_query
from chalicelib.platform.support import dead_letters
from chalicelib.platform.support import service as support
from chalicelib.platform.workspaces.service import to_public

api = Api("platform")


@api.route("/v1/workspaces/{workspace_id}/support-grants", methods=["POST"], permission="support.grant")
def create_grant(ctx: Ctx, workspace_id: str) -> Any:
    body = validate(ctx.json(), support.CREATE_FIELDS)
    return json_response(support.create(ctx.scope.entry(), body, actor=Actor.of(ctx.user), caller=ctx.caller), 201)


@api.route("/v1/workspaces/{workspace_id}/support-grants", permission="support.grant")
def list_grants(ctx: Ctx, workspace_id: str) -> Any:
    paging.check_params(ctx.query, ("limit", "after"))
    return support.list_grants(ctx.scope.entry(), paging.limit(ctx.query),
                               paging.decode("support_grants", ctx.query.get("after")))


@api.route("/v1/workspaces/{workspace_id}/support-grants/{grant_id}", methods=["DELETE"], permission="support.grant")
def revoke_grant(ctx: Ctx, workspace_id: str, grant_id: str) -> Any:
    return support.revoke(ctx.scope.entry(), grant_id, actor=Actor.of(ctx.user), caller=ctx.caller)


@api.route("/v1/support/workspaces/{workspace_id}", permission=AUTHENTICATED, scope=PATH)
def support_read_workspace(ctx: Ctx, workspace_id: str) -> Any:
    paging.check_params(ctx.query, ())
    ws, grant = support.authorize(ctx.user, workspace_id, "workspace", caller=ctx.caller)
    return {**to_public(ws), "support_grant": support.to_public(grant)}


@api.route("/v1/support/workspaces/{workspace_id}/audit/events", permission=AUTHENTICATED, scope=PATH)
def support_read_audit(ctx: Ctx, workspace_id: str) -> Any:
    filters = audit_query.parse_filters(ctx.query)
    limit = paging.limit(ctx.query, audit_query.DEFAULT_LIMIT, audit_query.MAX_LIMIT)
    after = audit_query.decode_after(ctx.query)
    ws, _ = support.authorize(ctx.user, workspace_id, "audit.events", caller=ctx.caller)
    return audit_query.query_events(ws.region, ws.id, filters, limit, after)


@api.route("/v1/support/dead-letters", permission=AUTHENTICATED, scope=GLOBAL)
def support_dead_letters(ctx: Ctx) -> Any:
    paging.check_params(ctx.query, ())
    return dead_letters.for_operator(ctx.user)
