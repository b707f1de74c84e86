"""How long queued work may hold its message and its run: the one place these figures are set.

Everything is derived from two facts: the workers function's timeout (the longest one invocation can
work) and a run's lease. ``infra/resources.py`` (queue visibility timeouts), ``infra/template.py`` (the
function timeout), the agent-run worker (lease, heartbeat) and the reapers (agent and sync runs) all
read them from here.

- SQS requires a queue's visibility timeout to be at least its consumer function's timeout, so a
  message comes back on its own only after ``VISIBILITY_TIMEOUT_S``.
- A live worker renews its lease every ``HEARTBEAT_EVERY_S`` (a third of the lease: two renewals may be
  late before the lease lapses); a crashed, killed or timed-out worker stops renewing.
- The reaper runs every ``REAP_EVERY_S``. An in-progress run whose lease lapsed ``RESUME_GRACE_S``
  ago is re-sent to its queue, so the next delivery resumes it from its ledger within
  ``LEASE_S + RESUME_GRACE_S + REAP_EVERY_S`` of the worker's death instead of waiting for the visibility
  timeout; after ``MAX_RESUMES`` resumes, or when its deadline passes with no live worker, it ends
  ``failed`` (``worker_lost``). A run still queued ``REQUEUE_AFTER_S`` after it was saved (its message
  was never sent, or was lost) is re-sent.
"""
from __future__ import annotations

WORKER_TIMEOUT_S = 300  # the workers function's timeout (one invocation)
VISIBILITY_TIMEOUT_S = WORKER_TIMEOUT_S  # SQS: at least the consumer function's timeout
RESIDENCY_VISIBILITY_TIMEOUT_S = 900  # restores and access requests run in the residency worker (longer)

LEASE_S = 60  # an agent run's lease past its last heartbeat
HEARTBEAT_EVERY_S = LEASE_S // 3
REAP_EVERY_S = 60
RESUME_GRACE_S = REAP_EVERY_S // 2  # a lapsed lease is left this long to its holder before a resume
MAX_RESUMES = 3
REQUEUE_AFTER_S = VISIBILITY_TIMEOUT_S  # a run queued this long without a claim is sent again

SYNC_REAP_EVERY_S = 300
SYNC_STALE_S = 2 * VISIBILITY_TIMEOUT_S  # an active sync run not re-sent for this long is re-sent (when stuck)
SYNC_MAX_AGE_S = 24 * 3600  # an active sync run older than this ends FAILED


def longest_resume_s() -> int:
    """The longest a dead worker's run waits before the next delivery resumes it."""
    return LEASE_S + RESUME_GRACE_S + REAP_EVERY_S
