"""Runs through the emulated SQS queue and the worker: lifecycle, steps, events (SSE with resume),
idempotency, audit with the starting correlation ID, lineage, listing with a status filter."""
from __future__ import annotations

import json

import pytest
from chalice.test import Client

from chalicelib.core import audit
from chalicelib.gateway import demo
from chalicelib.groups import create_app
from tests.functional.agents.helpers import (
    DEMO_PLAN_AGENT,
    create_agent,
    deliver,
    get_run,
    member,
    platform_client,
    queue_depth,
    sse_events,
    start_run,
)
from tests.functional.conftest import Tenant
from tests.functional.platform.helpers import call

SQL = ("SELECT c.email, c.city, count(o.order_id) AS orders FROM customers c JOIN orders o USING (customer_id) "
       "GROUP BY ALL ORDER BY orders DESC, c.city LIMIT 3")


@pytest.fixture
def seeded(tenant: Tenant) -> Tenant:
    demo.seed(tenant.workspace_id, tenant.region, tenant.email)
    return tenant


def test_run_goes_queued_in_progress_completed_through_the_queue(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        status, run = start_run(c, user.token, agent["id"], {"topic": "customers", "sql": SQL},
                                headers={"X-Correlation-Id": "start-run-corr-0001"})
        assert status == 202, run
        assert run["status"] == "queued", run
        assert queue_depth(seeded.region, "agent-runs") == 1
        r = c.http.get(f"/v1/agents/{agent['id']}/runs/{run['id']}/events?wait=1",
                       headers={"Authorization": f"Bearer {user.token}", "Last-Event-ID": "1"})
        live = r.body.decode() if isinstance(r.body, bytes) else r.body
        assert r.status_code == 200
        assert live.startswith("retry: 1000")
        assert sse_events(live) == []
        r = c.http.get(f"/v1/agents/{agent['id']}/runs/{run['id']}/events",
                       headers={"Authorization": f"Bearer {user.token}", "Last-Event-ID": "x1"})
        assert r.status_code == 400
        seen: list[str] = []

        def watch(index: int) -> None:
            seen.append(get_run(c, user.token, agent["id"], run["id"])["status"])

        result = deliver(seeded.region, after_step=watch)
        assert result["received"] == 1
        assert result["batchItemFailures"] == []
        assert seen
        assert set(seen) == {"in_progress"}
        done = get_run(c, user.token, agent["id"], run["id"])
        assert done["status"] == "completed", done
        assert [s["name"] for s in done["steps"]] == ["find", "schema", "rows", "remember"]
        assert all(s["status"] == "completed" and s["executions"] == 1 for s in done["steps"])
        rows = done["steps"][2]["output"]["rows"]
        assert len(rows) == 3
        assert all(set(r[0].split("@")[0]) <= {"*"} or "*" in r[0] for r in rows)
        assert done["output"]["provider"] == "extractive"
        assert done["output"]["answer"]
        assert done["usage"]["steps"] == 4
        assert done["usage"]["tool_calls"] == 4
        assert queue_depth(seeded.region, "agent-runs") == 0

        # events: sequence numbers, resume from Last-Event-ID
        r = c.http.get(f"/v1/agents/{agent['id']}/runs/{run['id']}/events",
                       headers={"Authorization": f"Bearer {user.token}"})
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        evs = sse_events(r.body.decode() if isinstance(r.body, bytes) else r.body)
        assert [int(e["id"]) for e in evs] == list(range(1, len(evs) + 1))
        assert evs[0]["event"] == "run.queued"
        assert evs[1]["event"] == "run.started"
        assert evs[-1]["event"] == "run.completed"
        assert "retry:" not in (r.body.decode() if isinstance(r.body, bytes) else r.body)
        r2 = c.http.get(f"/v1/agents/{agent['id']}/runs/{run['id']}/events",
                        headers={"Authorization": f"Bearer {user.token}", "Last-Event-ID": evs[4]["id"]})
        resumed = sse_events(r2.body.decode() if isinstance(r2.body, bytes) else r2.body)
        assert [e["id"] for e in resumed] == [e["id"] for e in evs[5:]]

    # audit: created and finished, both with the starting request's correlation id
    chain = [e for e in audit.iter_chain(seeded.region, seeded.workspace_id) if e["target"].get("id") == run["id"]]
    assert [e["action"] for e in chain] == ["agent_run.created", "agent_run.finished"]
    assert {e["correlation_id"] for e in chain} == {"start-run-corr-0001"}
    assert chain[1]["details"]["status"] == "completed"

    # lineage: the run is an AGENT_RUN node downstream of the datasets it read, shown only to the user who
    # ran it (runs are private, from Admins too)
    with Client(create_app("gateway")) as g:
        customers = next(d for d in demo.seed(seeded.workspace_id, seeded.region, seeded.email)["datasets"]
                         if d["name"] == "customers")["id"]
        graphs = {who: json.loads(g.http.get(f"/v1/lineage/{customers}",
                                             headers={"Authorization": f"Bearer {token}"}).body)
                  for who, token in (("runner", user.token), ("admin", seeded.token))}
    assert any(n["type"] == "AGENT_RUN" and n["id"] == run["id"] for n in graphs["runner"]["nodes"]), graphs
    assert run["id"] not in json.dumps(graphs["admin"])


def test_idempotency_key_replays_the_first_run(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        h = {"Idempotency-Key": "run-once-1"}
        s1, r1 = start_run(c, user.token, agent["id"], {"topic": "customers", "sql": SQL}, headers=h)
        s2, r2 = start_run(c, user.token, agent["id"], {"topic": "customers", "sql": SQL}, headers=h)
        assert s1 == s2 == 202
        assert r1["id"] == r2["id"]
        s3, r3 = start_run(c, user.token, agent["id"], {"topic": "orders", "sql": SQL}, headers=h)
        assert s3 == 409
        assert r3["code"] == "idempotency_key_reused"
        assert queue_depth(seeded.region, "agent-runs") == 1


def test_list_runs_is_paged_and_filtered_and_private(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    other = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token, {**DEMO_PLAN_AGENT, "plan": None, "tools": ["catalog_search"]})
        ids = [start_run(c, user.token, agent["id"], {})[1]["id"] for _ in range(3)]
        deliver(seeded.region)  # no plan and no question: each run fails with no_plan
        queued = start_run(c, user.token, agent["id"], {})[1]["id"]
        status, page, _ = call(c, "GET", f"/v1/agents/{agent['id']}/runs?limit=2", user.token)
        assert status == 200
        assert [r["id"] for r in page["runs"]] == [queued, ids[2]]
        assert page["has_more"]
        status, page2, _ = call(c, "GET", f"/v1/agents/{agent['id']}/runs?limit=2&after={page['next_cursor']}",
                                user.token)
        assert [r["id"] for r in page2["runs"]] == [ids[1], ids[0]]
        assert not page2["has_more"]
        status, failed, _ = call(c, "GET", f"/v1/agents/{agent['id']}/runs?status=failed", user.token)
        assert [r["id"] for r in failed["runs"]] == ids[::-1]
        assert {r["error"]["code"] for r in failed["runs"]} == {"no_plan"}
        status, mine, _ = call(c, "GET", f"/v1/agents/{agent['id']}/runs", other.token)
        assert status == 200
        assert mine["runs"] == []
        status, body, _ = call(c, "GET", f"/v1/agents/{agent['id']}/runs/{queued}", other.token)
        assert status == 404
        status, admin_view, _ = call(c, "GET", f"/v1/agents/{agent['id']}/runs?status=queued", seeded.token)
        assert [r["id"] for r in admin_view["runs"]] == [queued]
        status, bad, _ = call(c, "GET", f"/v1/agents/{agent['id']}/runs?status=done", user.token)
        assert status == 400
        assert bad["code"] == "validation_failed"
