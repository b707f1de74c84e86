"""Data gateway routes at {gateway_url}: /v1/connectors, /v1/catalog, /v1/lineage, /v1/query,
/v1/policies and /graphql. GraphQL and DuckDB are imported only inside the views that need them.

This module holds the connector admin routes (ingestion side); the read side is in ``read_routes.py``.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.http import paging
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.validation import F, validate
from chalicelib.core.store import idempotency
from chalicelib.gateway.ingest import connectors, source_access, sync
from chalicelib.gateway.vocabulary import INGESTION_MODES

api = Api("gateway")

SYNC_FIELDS = {"mode": F(str, enum=INGESTION_MODES)}


@api.route("/v1/connectors", permission="dashboards.read")
def list_connectors(ctx: Ctx) -> Any:
    paging.check_params(ctx.query, ("status", "category", "limit", "after"))
    items = connectors.list_connectors(ctx.scope, status=ctx.query.get("status"), category=ctx.query.get("category"))
    out = paging.page_sorted(items, ctx.query, "connectors", lambda c: [c["name"].lower(), c["id"]])
    return {"connectors": out.pop("_items"), **out}


@api.route("/v1/connectors", methods=["POST"], permission="connectors.manage")
def create_connector(ctx: Ctx) -> Any:
    return json_response(connectors.create_connector(ctx.scope, ctx.json(), ctx.caller), 201)


@api.route("/v1/connector-access", permission="connectors.manage")
def connector_access(ctx: Ctx) -> Any:
    """What a role must trust for s3/dynamodb connectors: the platform principal and the ExternalId."""

    return source_access.setup(ctx.user.workspace_id)


@api.route("/v1/connectors/{connector_id}", permission="dashboards.read")
def get_connector(ctx: Ctx, connector_id: str) -> Any:
    return connectors.get_connector(ctx.scope, connector_id)


@api.route("/v1/connectors/{connector_id}", methods=["PATCH"], permission="connectors.manage")
def update_connector(ctx: Ctx, connector_id: str) -> Any:
    return connectors.update_connector(ctx.scope, connector_id, ctx.json(), ctx.caller)


@api.route("/v1/connectors/{connector_id}", methods=["DELETE"], permission="connectors.manage")
def delete_connector(ctx: Ctx, connector_id: str) -> Any:
    return connectors.delete_connector(ctx.scope, connector_id, ctx.caller)


@api.route("/v1/connectors/{connector_id}/check", methods=["POST"], permission="connectors.manage")
def check_connector(ctx: Ctx, connector_id: str) -> Any:
    """Check the source now (the role-grant step's "check access"): the connector with its health."""
    return connectors.check_connector(ctx.scope, connector_id)


@api.route("/v1/connectors/{connector_id}/sync", methods=["POST"], permission="connectors.manage")
def request_sync(ctx: Ctx, connector_id: str) -> Any:
    body = validate(ctx.json(required=False), SYNC_FIELDS)
    run, replayed = sync.start_sync(ctx.scope, connector_id, mode=body.get("mode", "INCREMENTAL"),
                                    idempotency_key=ctx.header(idempotency.HEADER), caller=ctx.caller)
    return json_response(run, 202, {"Location": f"/v1/connectors/{connector_id}/syncs/{run['id']}",
                                    **({"Idempotent-Replayed": "true"} if replayed else {})})


@api.route("/v1/connectors/{connector_id}/syncs", permission="dashboards.read")
def list_sync_runs(ctx: Ctx, connector_id: str) -> Any:
    return sync.list_sync_runs(ctx.scope, connector_id, ctx.query)


@api.route("/v1/connectors/{connector_id}/syncs/{sync_id}", permission="dashboards.read")
def get_sync_run(ctx: Ctx, connector_id: str, sync_id: str) -> Any:
    connectors.load(ctx.scope, connector_id)
    return sync.get_sync_run(ctx.scope, sync_id, connector_id=connector_id)


@api.route("/v1/connectors/{connector_id}/uploads", methods=["POST"], permission="connectors.manage")
def create_upload(ctx: Ctx, connector_id: str) -> Any:
    return json_response(connectors.create_upload(ctx.scope, connector_id, ctx.json(), ctx.caller), 201)


