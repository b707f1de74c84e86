"""Exactly-once effects and the ways a run ends early: a worker killed between steps, a duplicate
delivery while the lease is held, poison messages, cancel (queued and during a run), deadlines and the
reaper."""
from __future__ import annotations

import json

import pytest

from chalicelib.agents import models
from chalicelib.agents.runtime import reaper, worker
from chalicelib.core import audit, aws, clock
from chalicelib.core.store import queues
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
from tests.functional.conftest import Tenant
from tests.functional.platform.helpers import call

SQL = "SELECT city, count(*) AS n FROM customers GROUP BY city ORDER BY n DESC, city LIMIT 2"
INPUT = {"topic": "customers", "sql": SQL}


class Killed(BaseException):
    """The worker process dies here (not an Exception: nothing in the worker catches it)."""


@pytest.fixture
def seeded(tenant: Tenant) -> Tenant:
    demo.seed(tenant.workspace_id, tenant.region, tenant.email)
    return tenant


def _audit_actions(t: Tenant, run_id: str) -> list[str]:
    return [e["action"] for e in audit.iter_chain(t.region, t.workspace_id) if e["target"].get("id") == run_id]


def _kill_after(n: int):  # type: ignore[no-untyped-def]
    def hook(index: int) -> None:
        if index == n:
            raise Killed()
    return hook


def test_worker_killed_between_steps_ends_with_one_completed_run_and_each_step_once(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        run = start_run(c, user.token, agent["id"], INPUT)[1]
        with pytest.raises(Killed):  # dies after step 2 of 4; the message is not deleted
            deliver(seeded.region, after_step=_kill_after(1), visibility=0)
        mid = get_run(c, user.token, agent["id"], run["id"])
        assert mid["status"] == "in_progress"
        assert [s["status"] for s in mid["steps"]] == ["completed", "completed"]
        assert queue_depth(seeded.region, QUEUE) == 1
        result = deliver(seeded.region)  # SQS redelivers the same message
        assert result["received"] == 1
        assert result["batchItemFailures"] == []
        done = get_run(c, user.token, agent["id"], run["id"])
    assert done["status"] == "completed"
    assert done["attempts"] == 2
    assert [s["name"] for s in done["steps"]] == ["find", "schema", "rows", "remember"]
    assert [s["executions"] for s in done["steps"]] == [1, 1, 1, 1]
    assert queue_depth(seeded.region, QUEUE) == 0
    assert _audit_actions(seeded, run["id"]) == ["agent_run.created", "agent_run.finished"]
    evs = models.events(seeded.region).query(models.run_key(seeded.workspace_id, run["id"]))
    types = [e.type for e in evs]
    assert types.count("run.completed") == 1
    assert types.count("step.completed") == 4


def test_a_duplicate_delivery_waits_for_the_lease_and_then_resumes_without_repeating_steps(
        seeded: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "BUSY_RETRY_S", 0)  # the emulator's visibility runs on the real clock
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        run = start_run(c, user.token, agent["id"], INPUT)[1]
        with pytest.raises(Killed):
            deliver(seeded.region, after_step=_kill_after(0), visibility=3600)  # the original stays invisible
        # a second copy of the message (SQS at-least-once) arrives while the first holder's lease is live
        queues.enqueue(QUEUE, seeded.region, {"v": 1, "workspace_id": seeded.workspace_id, "agent_id": agent["id"],
                                              "run_id": run["id"]})
        busy = deliver(seeded.region, visibility=0)
        assert busy["received"] == 1
        assert len(busy["batchItemFailures"]) == 1
        assert get_run(c, user.token, agent["id"], run["id"])["status"] == "in_progress"
        clock.advance(120)  # the dead holder's lease (60 s) runs out
        assert deliver(seeded.region)["batchItemFailures"] == []
        done = get_run(c, user.token, agent["id"], run["id"])
    assert done["status"] == "completed"
    assert [s["executions"] for s in done["steps"]] == [1, 1, 1, 1]


def test_poison_messages_end_in_the_dead_letter_queue_and_the_run_fails_with_the_reason(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        run = start_run(c, user.token, agent["id"], INPUT)[1]
    # the stored run is unreadable for the worker (every attempt raises)
    item = models.runs(seeded.region).get(seeded.workspace_id, run["id"])
    item.update(actions=[models.RunAttrs.agent.set("{not json")])
    sqs = aws.client("sqs", seeded.region)
    sqs.send_message(QueueUrl=aws.queue_url(QUEUE, seeded.region), MessageBody="not json at all")
    for _ in range(5):  # maxReceiveCount deliveries, each failing
        result = deliver(seeded.region, visibility=0)
        assert result["received"] == 2
        assert len(result["batchItemFailures"]) == 2
    assert deliver(seeded.region)["received"] == 0  # the queue moved both on
    assert queue_depth(seeded.region, QUEUE + "-dlq") == 2
    item.refresh()
    assert item.status == "failed"
    assert json.loads(item.error)["code"] == "poison_message"
    assert "dead-letter" in json.loads(item.error)["message"]
    assert _audit_actions(seeded, run["id"]) == ["agent_run.created", "agent_run.finished"]


def test_cancel_during_a_run_stops_it_before_its_next_step(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        run = start_run(c, user.token, agent["id"], INPUT, headers={"X-Correlation-Id": "start-corr-cancel-1"})[1]
        answers = []

        def cancel_now(index: int) -> None:
            if index == 0:
                answers.append(call(c, "POST", f"/v1/agents/{agent['id']}/runs/{run['id']}/cancel", user.token)[:2])
                answers.append(call(c, "POST", f"/v1/agents/{agent['id']}/runs/{run['id']}/cancel", user.token)[:2])

        assert deliver(seeded.region, after_step=cancel_now)["batchItemFailures"] == []
        assert [a[0] for a in answers] == [202, 202]
        done = get_run(c, user.token, agent["id"], run["id"])
        assert done["status"] == "cancelled"
        assert [s["name"] for s in done["steps"]] == ["find"]
        status, again, _ = call(c, "POST", f"/v1/agents/{agent['id']}/runs/{run['id']}/cancel", user.token)
        assert status == 200
        assert again["status"] == "cancelled"
    chain = [e for e in audit.iter_chain(seeded.region, seeded.workspace_id) if e["target"].get("id") == run["id"]]
    assert [e["action"] for e in chain] == ["agent_run.created", "agent_run.cancelled", "agent_run.finished"]
    assert {e["correlation_id"] for e in chain} == {"start-corr-cancel-1"}
    assert chain[2]["details"]["status"] == "cancelled"


def test_cancel_of_a_queued_run_is_immediate_and_the_worker_then_does_nothing(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    other = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        run = start_run(c, user.token, agent["id"], INPUT)[1]
        status, _, _ = call(c, "POST", f"/v1/agents/{agent['id']}/runs/{run['id']}/cancel", other.token)
        assert status == 404  # another member cannot even see it
        status, body, _ = call(c, "POST", f"/v1/agents/{agent['id']}/runs/{run['id']}/cancel", user.token)
        assert status == 200
        assert body["status"] == "cancelled"
        assert deliver(seeded.region)["batchItemFailures"] == []
        done = get_run(c, user.token, agent["id"], run["id"])
    assert done["status"] == "cancelled"
    assert done["steps"] == []
    assert done["started_at"] is None
    assert _audit_actions(seeded, run["id"]) == ["agent_run.created", "agent_run.cancelled", "agent_run.finished"]


def test_a_deadline_turns_a_stuck_run_into_expired(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        run = start_run(c, user.token, agent["id"], INPUT)[1]
        with pytest.raises(Killed):  # the worker dies and its message is lost to us for now
            deliver(seeded.region, after_step=_kill_after(0), visibility=3600)
        assert reaper.reap()["expired"] == []  # before the deadline nothing happens
        clock.advance(11 * 60)  # the agent's deadline is PT10M
        assert reaper.reap()["expired"] == [run["id"]]
        assert reaper.reap()["expired"] == []  # once
        done = get_run(c, user.token, agent["id"], run["id"])
    assert done["status"] == "expired"
    assert done["error"]["code"] == "deadline_exceeded"
    assert [s["name"] for s in done["steps"]] == ["find"]
    assert models.runs(seeded.region).get(seeded.workspace_id, run["id"]).active is None


def test_the_worker_expires_a_run_whose_deadline_passed_while_queued(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token, {"name": "quick", "tools": ["catalog_search"],
                                             "plan": [{"name": "a", "tool": "catalog_search", "input": {}}],
                                             "limits": {"deadline": "PT1S"}})
        run = start_run(c, user.token, agent["id"], {})[1]
        clock.advance(5)
        assert deliver(seeded.region)["batchItemFailures"] == []
        done = get_run(c, user.token, agent["id"], run["id"])
    assert done["status"] == "expired"
    assert done["steps"] == []
