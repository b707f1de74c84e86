"""Scheduled upkeep of runs: nothing stays active forever, and expired data goes.

- ``reap`` (every minute): every queued or in-progress run (the sparse ``by_active`` index) whose deadline
  has passed becomes ``expired``; an in-progress run whose worker stopped heartbeating for
  ``STALE_HEARTBEAT_S`` becomes ``failed`` (``worker_lost``). A worker still running is fenced out by
  the conditional writes (``lifecycle``), so it cannot complete a run the reaper finished.
- ``sweep`` (hourly): deletes memory older than 30 days and runs past their workspace's auto-expiry,
  which DynamoDB's TTL would delete eventually (the emulator's TTL never deletes).
"""
from __future__ import annotations

from typing import Any

from chalicelib.agents import memory, models, runs
from chalicelib.agents.models import ACTIVE_MARK, EXPIRED, FAILED, IN_PROGRESS
from chalicelib.agents.runtime import lifecycle
from chalicelib.core import clock
from chalicelib.core.logs import get_logger
from chalicelib.core.regions import OPEN_REGIONS

log = get_logger("agents.reaper")
STALE_HEARTBEAT_S = 600


def reap(regions: tuple[str, ...] = OPEN_REGIONS) -> dict[str, Any]:
    out: dict[str, Any] = {"expired": [], "failed": []}
    for region in regions:
        cls = models.runs(region)
        for item in cls.by_active.query(ACTIVE_MARK):
            now = clock.now()
            try:
                run = cls.get(item.workspace_id, item.id, consistent_read=True)
            except cls.DoesNotExist:
                continue
            if now >= int(run.deadline_at):
                if lifecycle.finish(run, EXPIRED, error={"code": "deadline_exceeded",
                                                         "message": "The run's deadline passed before it finished."}):
                    out["expired"].append(run.id)
            elif run.status == IN_PROGRESS and now - int(run.heartbeat_at or 0) > STALE_HEARTBEAT_S:
                if lifecycle.finish(run, FAILED, error={"code": "worker_lost", "message":
                                                        f"No heartbeat from the worker for {STALE_HEARTBEAT_S} s."}):
                    out["failed"].append(run.id)
    if out["expired"] or out["failed"]:
        log.info("agent runs reaped", extra=out)
    return out


def sweep(regions: tuple[str, ...] = OPEN_REGIONS) -> dict[str, Any]:
    removed_runs = 0
    now = int(clock.now())
    for region in regions:
        cls = models.runs(region)
        for run in cls.scan(cls.expires_at <= now):
            if run.status in models.TERMINAL_STATUSES:
                runs.purge(region, run)
                removed_runs += 1
    return {"memory": memory.sweep(regions), "runs": removed_runs}
