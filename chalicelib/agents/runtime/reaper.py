"""Scheduled upkeep of runs: a run whose worker died is resumed or ends, nothing stays active forever,
and expired data goes. Thresholds come from ``core/store/work_timing.py`` (derived from the lease and the
workers function's timeout), not set here.

- ``reap`` (every ``REAP_EVERY_S``), over the sparse ``by_active`` index (queued and in-progress runs):
  - an in-progress run whose lease lapsed ``RESUME_GRACE_S`` ago (its worker crashed, was killed or
    timed out) is sent again, so the next delivery resumes it from its ledger; after ``MAX_RESUMES``
    such resumes it ends ``failed`` with ``worker_lost``;
  - a run past its deadline ends: ``failed`` with ``worker_lost`` when no live worker holds it (it
    could not be resumed in time), otherwise ``expired``;
  - a run still queued ``REQUEUE_AFTER_S`` after it was saved or last sent (its message was never sent,
    or was lost) is sent again.
  A worker still running is fenced out by the conditional writes (``lifecycle``), so it cannot complete
  a run the reaper finished, and a re-sent message finds the run leased or finished.
- ``sweep`` (hourly): deletes memory older than 30 days and runs past their workspace's auto-expiry,
  which DynamoDB's TTL would delete eventually (the emulator's TTL never deletes).
"""
from __future__ import annotations

from typing import Any

from pynamodb.exceptions import UpdateError

from chalicelib.agents import memory, models, runs
from chalicelib.agents.models import ACTIVE_MARK, EXPIRED, FAILED, IN_PROGRESS, QUEUED
from chalicelib.agents.runtime import lifecycle
from chalicelib.core import clock
from chalicelib.core.logs import get_logger
from chalicelib.core.regions import OPEN_REGIONS
from chalicelib.core.store.work_timing import MAX_RESUMES, REQUEUE_AFTER_S, RESUME_GRACE_S

log = get_logger("agents.reaper")


def _lost(run: models.RunAttrs, why: str) -> bool:
    return lifecycle.finish(run, FAILED, error={"code": "worker_lost", "message": why})


def _send_again(run: models.RunAttrs, *, resume: bool) -> bool:
    """Mark the run re-sent (conditional on what was read, so two reapers send once) and send it."""
    R = models.RunAttrs
    now = int(clock.now())
    actions = [R.sent_at.set(now)] + ([R.resumes.set(int(run.resumes or 0) + 1)] if resume else [])
    cond = (R.status == run.status) & (R.attempt == int(run.attempt or 0))
    cond &= R.sent_at.does_not_exist() if run.sent_at is None else (R.sent_at == int(run.sent_at))
    try:
        run.update(actions=actions, condition=cond)
    except UpdateError:
        return False
    runs.enqueue(type(run).Meta.region, run)
    return True


def _queued_since(run: models.RunAttrs) -> float:
    return float(run.sent_at) if run.sent_at is not None else clock.parse_iso(run.created_at).timestamp()


def reap(regions: tuple[str, ...] = OPEN_REGIONS) -> dict[str, Any]:
    out: dict[str, Any] = {"expired": [], "failed": [], "resumed": [], "requeued": []}
    for region in regions:
        cls = models.runs(region)
        for item in cls.by_active.query(ACTIVE_MARK):
            now = clock.now()
            try:
                run = cls.get(item.workspace_id, item.id, consistent_read=True)
            except cls.DoesNotExist:
                continue
            lease_live = run.status == IN_PROGRESS and int(run.lease_expires_at or 0) > now
            if now >= int(run.deadline_at):
                if run.status == IN_PROGRESS and not lease_live:
                    if _lost(run, "The worker stopped and the run could not be resumed before its deadline."):
                        out["failed"].append(run.id)
                elif lifecycle.finish(run, EXPIRED, error={"code": "deadline_exceeded",
                                                           "message": "The run's deadline passed before it finished."}):
                    out["expired"].append(run.id)
            elif run.status == IN_PROGRESS and now > int(run.lease_expires_at or 0) + RESUME_GRACE_S:
                if int(run.resumes or 0) >= MAX_RESUMES:
                    if _lost(run, f"The worker was lost {MAX_RESUMES + 1} times."):
                        out["failed"].append(run.id)
                elif (run.sent_at is None or int(run.sent_at) < int(run.lease_expires_at or 0)) \
                        and _send_again(run, resume=True):
                    out["resumed"].append(run.id)
            elif run.status == QUEUED and now - _queued_since(run) > REQUEUE_AFTER_S:
                if _send_again(run, resume=False):
                    out["requeued"].append(run.id)
    if any(out.values()):
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
