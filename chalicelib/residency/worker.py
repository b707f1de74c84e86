"""The ``residency-jobs`` queue handler (Lambda SQS event shape): approved restores and access requests.

Messages: ``{"kind": "restore", "workspace_id", "request_id", "approved_by"}`` (``restore.run_queued``)
and ``{"kind": "access_request", "workspace_id", "request_id"}`` (``access_requests.run``). Each is
idempotent: the request's status moves from ``queued`` once, so a redelivered message does nothing.
"""
from __future__ import annotations

import json
from typing import Any

from chalicelib.core.store import queues
from chalicelib.core.tenancy import region_of
from chalicelib.residency import access_requests, restore


def handle_one(message: dict[str, Any]) -> dict[str, Any]:
    ws, request_id = str(message["workspace_id"]), str(message["request_id"])
    region = region_of(ws)
    if message.get("kind") == "restore":
        return restore.run_queued(region, ws, request_id)
    if message.get("kind") == "access_request":
        return access_requests.run(region, ws, request_id)
    raise ValueError(f"unknown residency job {message.get('kind')!r}")


def handle(event: dict[str, Any]) -> dict[str, Any]:
    """Lambda SQS handler with partial batch failures."""
    return queues.handle_batch(event, _handle_record, what="residency job")


def _handle_record(record: dict[str, Any]) -> bool:
    handle_one(json.loads(record.get("body") or ""))
    return True
