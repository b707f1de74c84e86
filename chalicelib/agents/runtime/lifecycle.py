"""State changes of a run that the worker and the reaper share: claim, heartbeat, finish.

Every change is conditional, so two deliveries of one message, a late worker and the reaper can never
both move a run: a claim bumps ``attempt`` (the fencing token) and takes the lease (``LEASE_S``, from
``core/store/work_timing.py``); a heartbeat and every ledger write check that ``attempt`` is still the caller's;
a finish moves an active run to a terminal state exactly once. A finish is ONE transaction: the run's
new state (marked ``finalized``), its pending events and ``run.<status>``, the ``agent_run.finished``
audit event (with the starting request's correlation ID) and the lineage edges ``dataset -> agent_run``
(kept as long as the run). ``record_finish`` writes the same for a run finished without them (a queued
run cancelled by the API, or one finished before finishes were one transaction).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pynamodb.exceptions import UpdateError

from chalicelib.agents import events, models
from chalicelib.agents import labels as labelling
from chalicelib.agents.labels import Label
from chalicelib.agents.models import ACTIVE_STATUSES, IN_PROGRESS, QUEUED
from chalicelib.core import audit, clock
from chalicelib.core.audit import SYSTEM
from chalicelib.core.logs import get_logger
from chalicelib.core.store.transact import Refused, Tx
from chalicelib.core.store.work_timing import LEASE_S
from chalicelib.gateway.catalog import lineage

log = get_logger("agents.lifecycle")
MAX_LINEAGE_IN_FINISH = 50  # edges written in the finish's transaction; more go in a batch after it
FINISH_ATTEMPTS = 5


@dataclass(frozen=True)
class RunCaller:
    """The starting request, as audit events of the run name it."""

    ip: str
    user_agent: str
    correlation_id: str


def starting_caller(run: models.RunAttrs) -> RunCaller:
    return RunCaller(run.ip or "", run.user_agent or "", run.correlation_id)


class LeaseHeld(Exception):
    """Another live delivery is working on the run."""


class Superseded(Exception):
    """The run moved on without this delivery (finished, or claimed by a newer attempt)."""


def claim(run: models.RunAttrs, delivery_id: str) -> int:
    """Take the run for this delivery; returns the new attempt number."""
    R = models.RunAttrs
    now = clock.now()
    attempt = int(run.attempt or 0) + 1
    actions = [R.status.set(IN_PROGRESS), R.attempt.set(attempt), R.lease_owner.set(delivery_id),
               R.lease_expires_at.set(int(now) + LEASE_S), R.heartbeat_at.set(int(now))]
    if not run.started_at:
        actions.append(R.started_at.set(clock.iso(now)))
    cond = (R.status == QUEUED) | ((R.status == IN_PROGRESS) & (
        R.lease_owner.does_not_exist() | (R.lease_owner == delivery_id) | (R.lease_expires_at < int(now))))
    try:
        run.update(actions=actions, condition=cond & (R.attempt == int(run.attempt or 0)))
    except UpdateError:
        run.refresh(consistent_read=True)
        if run.status not in ACTIVE_STATUSES:
            raise Superseded() from None
        raise LeaseHeld() from None
    return attempt


def heartbeat(run: models.RunAttrs, attempt: int) -> None:
    """Renew the lease (and re-read the run: a cancel request shows up here)."""
    R = models.RunAttrs
    now = int(clock.now())
    try:
        run.update(actions=[R.heartbeat_at.set(now), R.lease_expires_at.set(now + LEASE_S)],
                   condition=(R.attempt == attempt) & (R.status == IN_PROGRESS))
    except UpdateError:
        run.refresh(consistent_read=True)
        raise Superseded() from None


def finish(run: models.RunAttrs, status: str, *, attempt: int | None = None, output: dict[str, Any] | None = None,
           error: dict[str, str] | None = None, usage: dict[str, Any] | None = None,
           read: list[str] | None = None, labels: set[Label] | None = None,
           log_: events.RunLog | None = None) -> bool:
    """Move an active run to ``status`` (once), with its events, audit event and lineage in one
    transaction; True when this call did it. ``log_`` carries the caller's pending events."""
    R = models.RunAttrs
    region = type(run).Meta.region
    now = clock.iso()
    actions = [R.status.set(status), R.finished_at.set(now), R.active.remove(), R.lease_owner.remove(),
               R.lease_expires_at.remove(), R.finalized.set(1)]
    if output is not None:
        actions.append(R.output.set(json.dumps(output, default=str)))
    if error is not None:
        actions.append(R.error.set(json.dumps(error)))
    if usage is not None:
        actions.append(R.usage.set(json.dumps(usage)))
    datasets = sorted(set(read)) if read is not None else json.loads(run.read or "[]")
    if read is not None:
        actions.append(R.read.set(json.dumps(datasets)))
    if labels:  # what the run read restricts who may see its output (``labels.py``)
        actions.append(R.labels.set(labelling.dumps(labels)))
    cond = R.status.is_in(*ACTIVE_STATUSES)
    if attempt is not None:
        cond = cond & (R.attempt == attempt)
    run_log = log_ or events.RunLog(region, run.workspace_id, run.id, run.expires_at, None)
    data: dict[str, Any] = {"status": status, **({"error": error} if error else {})}
    run_log.add(f"run.{status}", data)
    details = {"status": status, "error": error if error is not None else (json.loads(run.error) if run.error else None),
               "usage": usage if usage is not None else json.loads(run.usage or "{}")}
    if not _commit_finish(region, run, run_log, _edges(region, run, datasets, status), actions, cond, details):
        run.refresh(consistent_read=True)
        return False
    run.status, run.finished_at, run.active, run.finalized = status, now, None, 1
    run.lease_owner = run.lease_expires_at = None
    if output is not None:
        run.output = json.dumps(output, default=str)
    if error is not None:
        run.error = json.dumps(error)
    if usage is not None:
        run.usage = json.dumps(usage)
    run.read = json.dumps(datasets)
    return True


def _commit_finish(region: str, run: models.RunAttrs, run_log: events.RunLog, edges: list[Any], actions: list[Any],
                   condition: Any, details: dict[str, Any]) -> bool:
    """The finish's audit event in ONE transaction with the run's fenced update (``actions`` under
    ``condition``), its pending events and the first lineage edges (the rest are written after); ``details``
    holds the event's status, error and usage. False when the fence refused (another writer finished it)."""
    def effects(tx: Tx) -> None:
        tx.update(run, actions=actions, condition=condition, tag="fence")
        run_log.put_in(tx)
        for edge in edges[:MAX_LINEAGE_IN_FINISH]:
            tx.save(edge)

    for _ in range(FINISH_ATTEMPTS):
        try:
            audit.append(region, run.workspace_id, "agent_run.finished", actor=SYSTEM,
                         target={"type": "agent_run", "id": run.id},
                         details={"agent_id": run.agent_id, "status": details["status"], "started_by": run.user_id,
                                  "error": details["error"], "usage": details["usage"]},
                         caller=starting_caller(run), effects=effects)
        except Refused as refused:
            if "fence" in refused.tags:
                return False
            run_log.resync()  # the API added an event (a cancel request) meanwhile
            continue
        run_log.committed()
        break
    else:
        raise RuntimeError("the run's finish kept colliding with other writers")
    if len(edges) > MAX_LINEAGE_IN_FINISH:
        with type(edges[0]).batch_write() as batch:
            for edge in edges[MAX_LINEAGE_IN_FINISH:]:
                batch.save(edge)
    return True


def _edges(region: str, run: models.RunAttrs, datasets: list[str], status: str) -> list[Any]:
    if not datasets:
        return []
    try:
        agent = json.loads(run.agent)
    except ValueError:  # an unreadable stored definition (a poison run) still finishes
        agent = {}
    return lineage.edge_items(region, run.workspace_id, [
        ("dataset", ds, "agent_run", run.id, {"agent_id": run.agent_id, "target_name": agent.get("name"),
                                              "status": status, "user_id": run.user_id})
        for ds in datasets], expires_at=run.expires_at)


def record_finish(region: str, run: models.RunAttrs) -> None:
    """The finish's event, audit event and lineage for a run finished without them; safe to repeat."""
    if run.finalized:
        return
    data: dict[str, Any] = {"status": run.status}
    if run.error:
        data["error"] = json.loads(run.error)
    R = models.RunAttrs
    run_log = events.RunLog(region, run.workspace_id, run.id, run.expires_at, None)
    run_log.add(f"run.{run.status}", data)
    details = {"status": run.status, "error": json.loads(run.error) if run.error else None,
               "usage": json.loads(run.usage or "{}")}
    if _commit_finish(region, run, run_log, _edges(region, run, json.loads(run.read or "[]"), run.status),
                      [R.finalized.set(1)], R.finalized.does_not_exist(), details):
        run.finalized = 1
