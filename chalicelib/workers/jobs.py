"""Scheduled and queue-triggered work. ``app.py`` declares each handler as a one-line delegate, and the
local runner (``infra/local_run.py``) calls these same functions with Lambda-shaped events.

Workers must not import graphql or duckdb at module level.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalicelib.core.logs import get_logger

log = get_logger("workers")


@dataclass(frozen=True)
class Scheduled:
    name: str
    every_seconds: int
    handler: Callable[[dict[str, Any]], Any]


def rotate_signing_keys(event: dict[str, Any]) -> dict[str, Any]:
    """Monthly: a new signing key; the old one stays published until its tokens expire."""
    from chalicelib.identity.oauth.signing import rotate

    kid = rotate()
    log.info("signing key rotated", extra={"kid": kid})
    return {"active_kid": kid}


def retire_signing_keys(event: dict[str, Any]) -> dict[str, Any]:
    """Hourly: unpublish keys whose last possible token has expired."""
    from chalicelib.identity.oauth.signing import retire_expired

    retired = retire_expired()
    if retired:
        log.info("signing keys retired", extra={"kids": retired})
    return {"retired": retired}


def expire_support_grants(event: dict[str, Any]) -> dict[str, Any]:
    """Every 5 minutes: write the audit event of each support access grant that has expired."""
    from chalicelib.platform.support import expire_grants

    return expire_grants(event)


SCHEDULED: tuple[Scheduled, ...] = (
    Scheduled("rotate_signing_keys", 30 * 24 * 3600, rotate_signing_keys),
    Scheduled("retire_signing_keys", 3600, retire_signing_keys),
    Scheduled("expire_support_grants", 300, expire_support_grants),
)

# queue name (as declared in infra/resources.py) -> handler(lambda_sqs_event) -> {"batchItemFailures": [...]}
QUEUE_HANDLERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def sync_jobs(event: dict[str, Any]) -> dict[str, Any]:
    """Connector sync runs (``sync-jobs`` queue); the worker module loads duckdb only when it runs."""
    from chalicelib.gateway import sync_worker

    return sync_worker.handle(event)


QUEUE_HANDLERS["sync-jobs"] = sync_jobs


class RecordFailed(Exception):
    """Raised to Lambda so it returns the record to its queue (the redrive policy then applies)."""


def as_lambda(handler: Callable[[dict[str, Any]], dict[str, Any]], event: dict[str, Any]) -> dict[str, Any]:
    """Run a queue handler under Lambda. Chalice cannot turn on ``ReportBatchItemFailures`` for its SQS
    event sources, so a returned ``batchItemFailures`` would be ignored and the message deleted; with
    ``batch_size=1`` a failed record is reported by raising instead."""
    result = handler(event)
    failed = result.get("batchItemFailures") or []
    if failed:
        raise RecordFailed(f"{len(failed)} record(s) failed: " + ", ".join(f["itemIdentifier"] for f in failed))
    return result
