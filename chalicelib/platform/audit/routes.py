"""Audit routes: read the trail (Admin, Viewer), export it (Admin; built and signed by the export job)."""
from __future__ import annotations

from typing import Any

from chalicelib.core.audit import Actor
from chalicelib.core.http import paging
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.validation import F, validate
from chalicelib.platform.audit import export as audit_export
from chalicelib.platform.audit import query as audit_query

api = Api("platform")

EXPORT_FIELDS = {"from": F(str, max_len=64), "to": F(str, max_len=64)}


@api.route("/v1/audit/events", permission="audit.read")
def list_events(ctx: Ctx) -> Any:
    ws_id = ctx.user.workspace_id
    filters = audit_query.parse_filters(ctx.query)
    limit = paging.limit(ctx.query, audit_query.DEFAULT_LIMIT, audit_query.MAX_LIMIT)
    return audit_query.query_events(ctx.scope.home, ws_id, filters, limit, audit_query.decode_after(ctx.query),
                                    audit_query.order_of(ctx.query))


@api.route("/v1/audit/exports", methods=["POST"], permission="audit.export")
def create_export(ctx: Ctx) -> Any:
    ws_id = ctx.user.workspace_id
    body = validate(ctx.json(required=False), EXPORT_FIELDS)
    filters = audit_query.parse_filters({k: v for k, v in body.items() if v is not None}, ("from", "to"))
    result = audit_export.request_export(ctx.scope.home, ws_id, filters, actor=Actor.of(ctx.user), caller=ctx.caller)
    return json_response(result, 202, headers={"Location": f"/v1/audit/exports/{result['id']}"})


@api.route("/v1/audit/exports/{export_id}", permission="audit.export")
def get_export(ctx: Ctx, export_id: str) -> Any:
    """An export verified again (signature, digest, hash chain) with a 5-minute download link."""
    paging.check_params(ctx.query, ())
    ws_id = ctx.user.workspace_id
    return audit_export.verify_stored(ctx.scope.home, ws_id, export_id)
