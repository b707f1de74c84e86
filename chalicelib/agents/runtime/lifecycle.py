"""State changes of a run that the worker and the reaper share: claim, heartbeat, finish.

Every change is a conditional update, so two deliveries of one message, a late worker and the reaper
can never both move a run: a claim bumps ``attempt`` (the fencing token) and takes the lease; a
heartbeat and every ledger write check that ``attempt`` is still the caller's; a finish moves an active
run to a terminal state exactly once. After a finish, ``record_finish`` writes the ``run.<status>``
event, the ``agent_run.finished`` audit event (with the starting request's correlation ID) and the
lineage edges ``dataset -> agent_run``, then marks the run ``finalized``; a delivery that finds a
finished but not finalized run (a crash in between) records them again.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pynamodb.exceptions import UpdateError

from chalicelib.agents import events, models
from chalicelib.agents.models import ACTIVE_STATUSES, IN_PROGRESS, QUEUED
from chalicelib.core import audit, clock
from chalicelib.core.audit import SYSTEM
from chalicelib.core.logs import get_logger
from chalicelib.gateway.catalog import lineage

log = get_logger("agents.lifecycle")


@dataclass(frozen=True)
class RunCaller:
    """The starting request, as audit events of the run name it."""

    ip: str
    user_agent: str
    correlation_id: str


def starting_caller(run: models.RunAttrs) -> RunCaller:
    return RunCaller(run.ip or "", run.user_agent or "", run.correlation_id)
LEASE_S = 60  # a delivery holds a run this long past its last heartbeat


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
           read: list[str] | None = None) -> bool:
    """Move an active run to ``status`` (once); True when this call did it. Then ``record_finish``."""
    R = models.RunAttrs
    now = clock.iso()
    actions = [R.status.set(status), R.finished_at.set(now), R.active.remove(), R.lease_owner.remove(),
               R.lease_expires_at.remove()]
    if output is not None:
        actions.append(R.output.set(json.dumps(output, default=str)))
    if error is not None:
        actions.append(R.error.set(json.dumps(error)))
    if usage is not None:
        actions.append(R.usage.set(json.dumps(usage)))
    if read is not None:
        actions.append(R.read.set(json.dumps(sorted(set(read)))))
    cond = R.status.is_in(*ACTIVE_STATUSES)
    if attempt is not None:
        cond = cond & (R.attempt == attempt)
    try:
        run.update(actions=actions, condition=cond)
    except UpdateError:
        run.refresh(consistent_read=True)
        return False
    record_finish(type(run).Meta.region, run)
    return True


def record_finish(region: str, run: models.RunAttrs) -> None:
    """The finish's event, audit event and lineage (see the module docstring); safe to repeat."""
    if run.finalized:
        return
    data: dict[str, Any] = {"status": run.status}
    if run.error:
        data["error"] = json.loads(run.error)
    events.append(region, run.workspace_id, run.id, f"run.{run.status}", data, run.expires_at)
    audit.append(region, run.workspace_id, "agent_run.finished", actor=SYSTEM,
                 target={"type": "agent_run", "id": run.id},
                 details={"agent_id": run.agent_id, "status": run.status, "started_by": run.user_id,
                          "error": (json.loads(run.error) if run.error else None),
                          "usage": json.loads(run.usage or "{}")},
                 caller=starting_caller(run))
    read = json.loads(run.read or "[]")
    if read:
        agent = json.loads(run.agent)
        lineage.record_edges(run.workspace_id, [
            ("dataset", ds, "agent_run", run.id, {"agent_id": run.agent_id, "target_name": agent.get("name"),
                                                  "status": run.status}) for ds in read])
    R = models.RunAttrs
    try:
        run.update(actions=[R.finalized.set(1)], condition=R.finalized.does_not_exist())
    except UpdateError:
        pass
