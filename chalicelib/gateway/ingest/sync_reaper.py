"""Scheduled upkeep of sync runs, as ``agents/runtime/reaper.py`` is for agent runs: a run is never left active
forever. Thresholds come from ``core/store/work_timing.py``.

- a run still QUEUED ``SYNC_STALE_S`` after it was saved or last re-sent (its message was never sent:
  the queue was unreachable after the run was committed, or the message was lost) is sent again;
- a RUNNING or RETRYING run whose connector lease is free or lapsed (its worker died) and that was not
  re-sent for ``SYNC_STALE_S`` is sent again; the worker takes the lease over (``sync_worker``);
- a run still active ``SYNC_MAX_AGE_S`` after it was queued ends FAILED, with its
  ``connector.sync_failed`` audit event in the same transaction.

Active runs are found by a filtered scan of ``sync_runs`` every ``SYNC_REAP_EVERY_S`` (the table holds
runs of every workspace of the region; a run is small).
"""
from __future__ import annotations

from typing import Any

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import audit, clock
from chalicelib.core.audit import SYSTEM
from chalicelib.core.logs import get_logger
from chalicelib.core.regions import OPEN_REGIONS
from chalicelib.core.store.transact import Refused
from chalicelib.core.store.work_timing import SYNC_MAX_AGE_S, SYNC_STALE_S
from chalicelib.gateway import models
from chalicelib.gateway.ingest import sync

log = get_logger("gateway.sync_reaper")
ACTIVE = ("QUEUED", "RUNNING", "RETRYING")


def _lease_free(region: str, run: models.SyncRunAttrs, now: float) -> bool:
    try:
        conn = models.connectors(region).get(run.workspace_id, run.connector_id, consistent_read=True)
    except DoesNotExist:
        return True
    return conn.lock_owner is None or int(conn.lock_expires_at or 0) < now


def _send_again(region: str, run: models.SyncRunAttrs) -> bool:
    R = models.SyncRunAttrs
    cond = (R.status == run.status) & (R.sent_at.does_not_exist() if run.sent_at is None
                                       else R.sent_at == int(run.sent_at))
    try:
        run.update(actions=[R.sent_at.set(int(clock.now()))], condition=cond)
    except UpdateError:
        return False
    sync.enqueue(region, run)
    return True


def _give_up(region: str, run: models.SyncRunAttrs) -> bool:
    R = models.SyncRunAttrs
    error = f"the sync did not finish within {SYNC_MAX_AGE_S // 3600} h of its request"
    try:
        audit.append(region, run.workspace_id, "connector.sync_failed", actor=SYSTEM,
                     target={"type": "connector", "id": run.connector_id},
                     details={"sync_id": run.id, "error": error, "attempts": int(run.attempts or 0)},
                     effects=lambda tx: tx.update(run, actions=[R.status.set("FAILED"), R.error.set(error),
                                                                R.finished_at.set(clock.iso())],
                                                  condition=R.status.is_in(*ACTIVE)))
    except Refused:
        return False
    return True


def reap(regions: tuple[str, ...] = OPEN_REGIONS) -> dict[str, Any]:
    out: dict[str, list[str]] = {"resent": [], "failed": []}
    R = models.SyncRunAttrs
    for region in regions:
        for run in models.sync_runs(region).scan(R.status.is_in(*ACTIVE), consistent_read=True):
            now = clock.now()
            queued = clock.parse_iso(run.queued_at).timestamp()
            if now - queued > SYNC_MAX_AGE_S:
                if _give_up(region, run):
                    out["failed"].append(run.id)
                continue
            last_sent = float(run.sent_at) if run.sent_at is not None else queued
            if now - last_sent <= SYNC_STALE_S:
                continue
            if (run.status == "QUEUED" or _lease_free(region, run, now)) and _send_again(region, run):
                out["resent"].append(run.id)
    if any(out.values()):
        log.info("sync runs reaped", extra=out)
    return out
