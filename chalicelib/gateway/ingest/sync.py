"""Sync requests: a SyncRun is stored QUEUED (in one transaction with the connector's ``last_sync_id``
and the ``connector.sync_requested`` audit event), then a message goes to the workspace region's
``sync-jobs`` queue; ``sync_worker`` does the work, and ``sync_reaper`` re-sends a run whose message was
never sent. Idempotent per caller and ``Idempotency-Key`` (same key + same request replays the first
SyncRun as it is now; same key + another request is a 409)."""
from __future__ import annotations

import json
from typing import Any

from pynamodb.exceptions import DoesNotExist

from chalicelib.core import audit, clock, correlation
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, not_found, validation_error
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.store import idempotency, queues
from chalicelib.core.store.transact import Refused, Tx
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway import models
from chalicelib.gateway.ingest import connectors
from chalicelib.gateway.vocabulary import INGESTION_MODES, SYNC_STATUSES

log = get_logger("gateway.sync_requests")
QUEUE = "sync-jobs"
MESSAGE_VERSION = 1


def run_to_dict(run: models.SyncRunAttrs) -> dict[str, Any]:
    details = json.loads(run.details or "{}")
    return {
        "id": run.id,
        "connector_id": run.connector_id,
        "dataset_id": run.dataset_id,
        "mode": run.mode,
        "status": run.status,
        "queued_at": run.queued_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "rows_read": int(run.rows_read or 0),
        "objects_read": int(run.objects_read or 0),
        "rows_written": int(run.rows_written or 0),
        "rows_deleted": int(details.get("rows_deleted", 0)),
        "attempts": int(run.attempts or 0),
        "error": run.error,
        "schema_drift": details.get("drift"),
        "skipped": list(details.get("skipped") or []),
    }


def request_sync(scope: RequestScope, connector_id: str, *, mode: str = "INCREMENTAL",
                 idempotency_key: str | None = None, caller: Any = None) -> dict[str, Any]:
    """Queue a sync of the connector and return its SyncRun (status QUEUED, or the replayed run)."""
    return start_sync(scope, connector_id, mode=mode, idempotency_key=idempotency_key, caller=caller)[0]


def start_sync(scope: RequestScope, connector_id: str, *, mode: str = "INCREMENTAL",
               idempotency_key: str | None = None, caller: Any = None) -> tuple[dict[str, Any], bool]:
    """``request_sync``, also saying whether the answer is a replay of an earlier request's."""
    if mode not in INGESTION_MODES:
        raise validation_error([{"field": "mode", "message": "must be one of " + ", ".join(INGESTION_MODES)}])
    item, region = connectors.load(scope, connector_id)

    def work() -> tuple[int, Any]:
        if item.status == "PAUSED":
            raise ApiError(409, "connector_paused", "The connector is paused; resume it before syncing.")
        now = clock.iso()
        run = models.sync_runs(region)(
            scope.workspace_id, new_id("sync"), connector_id=connector_id, mode=mode, status="QUEUED",
            requested_by=scope.principal.user_id, correlation_id=correlation.current(), queued_at=now,
            dataset_id=item.dataset_id)

        def effects(tx: Tx) -> None:
            tx.save(run, condition=models.SyncRunAttrs.id.does_not_exist())
            tx.update(item, actions=[models.ConnectorAttrs.last_sync_id.set(run.id)],
                      condition=models.ConnectorAttrs.id.exists())
            idempotency.complete_in(tx, {"type": "sync_run", "id": run.id})

        try:
            audit.append(region, scope.workspace_id, "connector.sync_requested",
                         actor=audit.Actor.of(scope.principal), target={"type": "connector", "id": connector_id},
                         details={"sync_id": run.id, "mode": mode}, caller=caller, effects=effects)
        except Refused as refused:
            if refused.tags != {"effect"}:
                raise
            raise not_found("connector") from None  # deleted meanwhile
        enqueue(region, run)
        return 202, run_to_dict(run)

    def replay(ref: dict[str, Any]) -> tuple[int, Any]:
        return 202, get_sync_run(scope, ref["id"], connector_id=connector_id)

    _, body, replayed = idempotency.run(region, scope.principal.user_id, f"{scope.workspace_id}#connector.sync",
                                        idempotency_key, {"connector_id": connector_id, "mode": mode}, work,
                                        ref_of=lambda b: {"type": "sync_run", "id": b["id"]}, replay=replay)
    return body, replayed


def enqueue(region: str, run: models.SyncRunAttrs) -> None:
    """Send the run's message; a failed send leaves it QUEUED, and the sync reaper sends it again."""
    try:
        body = {"v": MESSAGE_VERSION, "workspace_id": run.workspace_id, "connector_id": run.connector_id,
                "sync_id": run.id}
        if run.dataset_id:  # lets the worker read the run, connector and dataset together
            body["dataset_id"] = run.dataset_id
        queues.enqueue(QUEUE, region, body, group_key=run.connector_id)
    except Exception:  # noqa: BLE001 - the run and its audit event are committed; the reaper re-sends
        log.exception("sync message not sent", extra={"sync_id": run.id})


def get_sync_run(scope: RequestScope, sync_id: str, *, connector_id: str | None = None) -> dict[str, Any]:
    """One SyncRun of the scope's workspace (404 otherwise, or when it belongs to another connector)."""
    if not is_id(sync_id, "sync"):
        raise not_found("sync run")
    region = scope.home
    try:
        run = models.sync_runs(region).get(scope.workspace_id, sync_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("sync run") from None
    if connector_id is not None and run.connector_id != connector_id:
        raise not_found("sync run")
    return run_to_dict(run)


def list_sync_runs(scope: RequestScope, connector_id: str, query: dict[str, str]) -> dict[str, Any]:
    """The connector's runs, newest first (sync ids are time-ordered), cursor-paged (``limit``, ``after``),
    optionally only one ``status``. The connector must be the caller's (else 404)."""
    paging.check_params(query, ("limit", "after", "status"))
    lim = paging.limit(query)
    after = paging.decode("sync_runs", query.get("after"))
    status = query.get("status")
    if status is not None and status not in SYNC_STATUSES:
        raise validation_error([{"field": "status", "message": "must be one of " + ", ".join(SYNC_STATUSES)}])
    _, region = connectors.load(scope, connector_id)
    R = models.SyncRunAttrs
    cond = R.connector_id == connector_id
    if status is not None:
        cond &= R.status == status
    # the runs of the workspace, filtered to this connector: reads scale with the workspace's runs per page
    found = models.sync_runs(region).query(scope.workspace_id, R.id < after if after else None,
                                           filter_condition=cond, scan_index_forward=False, consistent_read=True)
    items = []
    for run in found:
        items.append(run_to_dict(run))
        if len(items) > lim:
            break
    out = paging.page(items, lim, "sync_runs", lambda r: r["id"])
    return {"syncs": out.pop("_items"), **out}
