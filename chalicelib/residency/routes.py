"""Backup, restore and access-request routes at {base_url}/v1 (platform group). Thin: every view calls a
service."""
from __future__ import annotations

from typing import Any

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.core import audit
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.validation import validate
from chalicelib.residency import access_requests, backups, restore

api = Api("platform")


@api.route("/v1/backups", ["POST"], permission="backups.manage")
def create_backup(ctx: Ctx) -> Response:

    validate(ctx.json(required=False), {})
    user = ctx.user
    job = backups.request(ctx.scope.home, user.workspace_id,
                          actor=audit.Actor.of(user), caller=ctx.caller)
    return json_response(job, 202, {"Location": f"/v1/backups/{job['id']}"})


@api.route("/v1/backups", permission="backups.manage")
def list_backups(ctx: Ctx) -> dict[str, Any]:
    return backups.list_backups(ctx.scope.home, ctx.user.workspace_id, ctx.query)


@api.route("/v1/backups/{backup_id}", permission="backups.manage")
def read_backup(ctx: Ctx, backup_id: str) -> dict[str, Any]:
    ws = ctx.user.workspace_id
    return backups.describe(ctx.scope.home, ws, backup_id)


@api.route("/v1/backups/{backup_id}/restore-requests", ["POST"], permission="backups.manage")
def request_restore(ctx: Ctx, backup_id: str) -> Response:
    return json_response(restore.request(ctx.scope, backup_id, ctx.json(required=False), ctx.caller), 201)


@api.route("/v1/backups/{backup_id}/restore-requests", permission="backups.manage")
def list_restore_requests(ctx: Ctx, backup_id: str) -> dict[str, Any]:
    return restore.list_requests(ctx.scope, backup_id, ctx.query)


@api.route("/v1/backups/{backup_id}/restore-requests/{request_id}", permission="backups.manage")
def read_restore_request(ctx: Ctx, backup_id: str, request_id: str) -> dict[str, Any]:
    return restore.get(ctx.scope, backup_id, request_id)


@api.route("/v1/backups/{backup_id}/restore-requests/{request_id}/approve", ["POST"], permission="backups.manage")
def approve_restore(ctx: Ctx, backup_id: str, request_id: str) -> Response:
    req = restore.approve(ctx.scope, backup_id, request_id, ctx.json(required=False), ctx.caller)
    return json_response(req, 202 if req["status"] == "queued" else 200)


@api.route("/v1/access-requests", ["POST"], permission="access_requests.create")
def create_access_request(ctx: Ctx) -> Response:
    return json_response(access_requests.create(ctx.scope, ctx.json(), ctx.caller), 202)


@api.route("/v1/access-requests/{request_id}", permission="access_requests.create")
def read_access_request(ctx: Ctx, request_id: str) -> dict[str, Any]:
    return access_requests.get(ctx.scope, request_id)
