"""The ``residency-jobs`` queue handler (Lambda SQS event shape): approved restores and access requests.

Messages: ``{"kind": "restore", "workspace_id", "request_id", "approved_by"}`` (``restore.run_queued``)
and ``{"kind": "access_request", "workspace_id", "request_id"}`` (``access_requests.run``). Each is
idempotent: the request's status moves from ``queued`` once, so a redelivered message does nothing.
"""
from __future__ import annotations

import json
from typing import Any

from chalicelib.core import queues
from chalicelib.core.logs import get_logger
from chalicelib.core.tenancy import region_of
from chalicelib.residency import access_requests, restore

log = get_logger("residency.worker")


def handle_one(message: dict[str, Any]) -> dict[str, Any]:
    ws, request_id = str(message["workspace_id"]), str(message["request_id"])
    region = region_of(ws)
    if message.get("kind") == "restore":
        return restore.run_queued(region, ws, request_id)
    if message.get("kind") == "access_request":
        return access_requests.run(region, ws, request_id)
    raise ValueError(f"unknown residency job {message.get('kind')!r}")


def handle(event: dict[str, Any]) -> dict[str, Any]:
    failures = []
    for record in event.get("Records", []):
        queues.record_correlation(record)
        try:
            handle_one(json.loads(record.get("body") or ""))
        except Exception:  # noqa: BLE001 - one failed job must not take the batch down
            log.exception("residency job failed", extra={"message_id": record.get("messageId")})
            failures.append({"itemIdentifier": record.get("messageId", "")})
    return {"batchItemFailures": failures}
