"""The ``residency-jobs`` queue handler (Lambda SQS event shape): approved restores, access requests and
backups.

Messages: ``{"kind": "restore", "workspace_id", "request_id", "approved_by"}`` (``restore.run_queued``),
``{"kind": "access_request", "workspace_id", "request_id"}`` (``access_requests.run``) and
``{"kind": "backup", "workspace_id", "backup_id", "actor"}`` (``backups.run_job``, one per workspace,
queued by ``POST /v1/backups`` and by the daily schedule). Each is idempotent: the request's status
moves from ``queued`` once and a completed backup is not taken again, so a redelivered message does
nothing twice. A backup that fails is raised, so the queue retries it (the delivery count says which
attempt is the last before the dead-letter queue).
"""
from __future__ import annotations

import json
from functools import partial
from typing import Any

from chalicelib.core.store import queues
from chalicelib.core.tenancy import region_of
from chalicelib.residency import access_requests, backups, restore
from chalicelib.residency.models import JOBS_QUEUE


def handle_one(message: dict[str, Any], views: access_requests.PrivateViews) -> dict[str, Any]:
    ws, request_id = str(message["workspace_id"]), str(message["request_id"])
    region = region_of(ws)
    if message.get("kind") == "restore":
        return restore.run_queued(region, ws, request_id)
    if message.get("kind") == "access_request":
        return access_requests.run(region, ws, request_id, views)
    raise ValueError(f"unknown residency job {message.get('kind')!r}")


def handle(event: dict[str, Any], views: access_requests.PrivateViews) -> dict[str, Any]:
    """Lambda SQS handler with partial batch failures; ``views``: how each private table's item reads to its
    author now (``access_requests.PrivateViews``, given by the composition root)."""
    return queues.handle_batch(event, partial(_handle_record, views=views), what="residency job")


def _handle_record(record: dict[str, Any], views: access_requests.PrivateViews) -> bool:
    message = json.loads(record.get("body") or "")
    if isinstance(message, dict) and message.get("kind") == "backup":
        job = queues.parse_body(record, workspace_id="ws", backup_id="bkp")
        if job is None:
            raise ValueError("malformed backup job")
        region = region_of(job["workspace_id"])
        attempt = queues.receive_count(record)
        actor = job.get("actor") if isinstance(job.get("actor"), dict) else {}
        backups.run_job(region, job["workspace_id"], job["backup_id"], actor, attempt=attempt,
                        last_attempt=attempt >= queues.max_receives(JOBS_QUEUE, region))
        return True
    handle_one(message, views)
    return True
