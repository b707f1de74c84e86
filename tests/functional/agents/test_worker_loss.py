"""Runs that outlive their worker: the worker is killed after each step boundary of a 4-step run (a
fault injected at every boundary); the reaper sees the lapsed lease and sends the run again, and the
next delivery resumes it from its ledger. The run completes with each step's tool executed exactly once
(the tool calls are counted), or, when the worker is lost too often or the deadline passes, ends
``failed`` with ``worker_lost``. Thresholds come from ``core/store/work_timing.py``."""
from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from chalicelib.agents import models, tools
from chalicelib.agents.runtime import reaper
from chalicelib.core import audit, clock
from chalicelib.core.store import work_timing as timing
from chalicelib.gateway import demo
from tests.functional.agents.helpers import (
    QUEUE,
    create_agent,
    deliver,
    get_run,
    member,
    platform_client,
    queue_depth,
    start_run,
)
from tests.functional.agents.test_worker import INPUT, Killed
from tests.functional.conftest import Tenant

STEPS = ["catalog_search", "dataset_schema", "query", "memory_write"]


@pytest.fixture
def seeded(tenant: Tenant) -> Tenant:
    demo.seed(tenant.workspace_id, tenant.region, tenant.email)
    return tenant


@pytest.fixture
def tool_calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    seen: Counter[str] = Counter()
    real = tools.call

    def counting(name: str, ctx: Any, args: Any) -> Any:
        seen[name] += 1
        return real(name, ctx, args)

    monkeypatch.setattr(tools, "call", counting)
    return seen


def _kill_at(*indexes: int):  # type: ignore[no-untyped-def]
    """Kill the worker after each of these step indexes, once each (one per delivery)."""
    pending = list(indexes)

    def hook(index: int) -> None:
        if pending and index == pending[0]:
            pending.pop(0)
            raise Killed()
    return hook


def _lose_worker() -> None:
    """Time passes until the dead worker's lease has lapsed past the grace the reaper gives it."""
    clock.advance(timing.LEASE_S + timing.RESUME_GRACE_S + 1)


def _chain(t: Tenant, run_id: str) -> list[str]:
    return [e["action"] for e in audit.iter_chain(t.region, t.workspace_id) if e["target"].get("id") == run_id]


@pytest.mark.parametrize("boundary", range(4), ids=[f"after_step_{i + 1}" for i in range(4)])
def test_killed_after_a_step_the_run_resumes_and_runs_each_step_once(
        seeded: Tenant, tool_calls: Counter[str], boundary: int) -> None:
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        run = start_run(c, user.token, agent["id"], INPUT)[1]
        with pytest.raises(Killed):  # the message stays in flight: SQS would return it only after the timeout
            deliver(seeded.region, after_step=_kill_at(boundary), visibility=3600)
        mid = get_run(c, user.token, agent["id"], run["id"])
        assert mid["status"] == "in_progress"
        assert len(mid["steps"]) == boundary + 1
        assert reaper.reap()["resumed"] == []  # the lease is still live: the worker might only be slow
        _lose_worker()
        assert reaper.reap()["resumed"] == [run["id"]]
        assert reaper.reap()["resumed"] == []  # sent once
        assert deliver(seeded.region)["batchItemFailures"] == []
        done = get_run(c, user.token, agent["id"], run["id"])
    assert done["status"] == "completed", done["error"]
    assert tool_calls == Counter(STEPS)  # each step's tool exactly once, across both deliveries
    assert [s["tool"] for s in done["steps"]] == STEPS
    assert [s["executions"] for s in done["steps"]] == [1, 1, 1, 1]
    assert done["attempts"] == 2
    assert _chain(seeded, run["id"]) == ["agent_run.created", "agent_run.finished"]
    assert audit.verify_live(seeded.region, seeded.workspace_id).ok
    log = list(models.events(seeded.region).query(models.run_key(seeded.workspace_id, run["id"]),
                                                 models.EventAttrs.sk.startswith(models.EVENT_PREFIX)))
    types = [e.type for e in log]
    assert types.count("step.completed") == 4
    assert types.count("run.completed") == 1
    assert types[:2] == ["run.queued", "run.started"]
    assert [int(e.seq) for e in log] == list(range(1, len(log) + 1))  # numbered without a gap


def test_the_dead_workers_own_message_returning_later_changes_nothing(
        seeded: Tenant, tool_calls: Counter[str]) -> None:
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        run = start_run(c, user.token, agent["id"], INPUT)[1]
        with pytest.raises(Killed):
            deliver(seeded.region, after_step=_kill_at(1), visibility=0)  # returns at once
        _lose_worker()
        assert reaper.reap()["resumed"] == [run["id"]]
        for _ in range(3):  # the re-sent message and the dead worker's own one
            deliver(seeded.region)
        done = get_run(c, user.token, agent["id"], run["id"])
    assert done["status"] == "completed"
    assert tool_calls == Counter(STEPS)
    assert queue_depth(seeded.region, QUEUE) == 0


def test_killed_after_every_step_the_run_completes_or_ends_worker_lost(
        seeded: Tenant, tool_calls: Counter[str]) -> None:
    """Killed after steps 1, 2 and 3 (three resumes, the most allowed): it completes. Killed after every
    step including the last: the fourth loss ends it ``failed``/``worker_lost``, no step run twice."""
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        survivor = start_run(c, user.token, agent["id"], INPUT)[1]
        hook = _kill_at(0, 1, 2)
        for _ in range(3):
            with pytest.raises(Killed):
                deliver(seeded.region, after_step=hook, visibility=3600)
            _lose_worker()
            assert reaper.reap()["resumed"] == [survivor["id"]]
        deliver(seeded.region)
        done = get_run(c, user.token, agent["id"], survivor["id"])
        assert done["status"] == "completed"
        assert tool_calls == Counter(STEPS)
        tool_calls.clear()

        doomed = start_run(c, user.token, agent["id"], INPUT)[1]
        hook = _kill_at(0, 1, 2, 3)
        for _ in range(timing.MAX_RESUMES + 1):
            with pytest.raises(Killed):
                deliver(seeded.region, after_step=hook, visibility=3600)
            _lose_worker()
            reaped = reaper.reap()
        assert reaped["failed"] == [doomed["id"]]
        lost = get_run(c, user.token, agent["id"], doomed["id"])
    assert lost["status"] == "failed"
    assert lost["error"]["code"] == "worker_lost"
    assert tool_calls == Counter(STEPS)  # every step once, none repeated by the resumes
    assert _chain(seeded, doomed["id"]) == ["agent_run.created", "agent_run.finished"]


def test_a_run_whose_message_was_never_sent_is_sent_by_the_reaper(
        seeded: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    from chalicelib.core.store import queues

    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)

        def down(*_: Any, **__: Any) -> str:
            raise ConnectionError("queue unreachable")

        monkeypatch.setattr(queues, "enqueue", down)
        status, run = start_run(c, user.token, agent["id"], INPUT)
        assert status == 202  # saved with its audit event; the send failed
        monkeypatch.undo()
        assert queue_depth(seeded.region, QUEUE) == 0
        assert reaper.reap()["requeued"] == []
        clock.advance(timing.REQUEUE_AFTER_S + 1)
        assert reaper.reap()["requeued"] == [run["id"]]
        assert reaper.reap()["requeued"] == []
        deliver(seeded.region)
        assert get_run(c, user.token, agent["id"], run["id"])["status"] == "completed"
