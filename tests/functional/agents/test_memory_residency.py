"""Memory is per agent and user and kept 30 days (controlled clock); definitions CRUD; an EU workspace's
definitions, runs, steps, events and memory exist only in eu-central-1 (queue included)."""
from __future__ import annotations

from chalicelib.agents import memory, models
from chalicelib.agents.runtime import reaper
from chalicelib.core import clock
from chalicelib.core.authz import Principal
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway import demo
from infra.resources import REGIONAL, TABLES
from tests.functional.agents.helpers import (
    DEMO_PLAN_AGENT,
    QUEUE,
    create_agent,
    deliver,
    get_run,
    member,
    platform_client,
    queue_depth,
    start_run,
)
from tests.functional.conftest import Tenant, make_tenant, stored_items
from tests.functional.platform.helpers import call, user_token

AGENT_TABLES = ("agents", "agent_runs", "agent_run_log", "agent_memory")
READER = RequestScope(Principal(user_id="usr_1", workspace_id="ws", roles=("member",), email="", amr=("pwd",),
                                token_id="t"))


def test_memory_older_than_30_days_is_gone_and_newer_memory_stays(tenant: Tenant) -> None:
    r = tenant.region
    ws = tenant.workspace_id
    memory.write(r, ws, "agt_A", "usr_1", "old", {"v": 1})
    clock.advance(20 * 86400)
    memory.write(r, ws, "agt_A", "usr_1", "new", "fresh")
    memory.write(r, ws, "agt_A", "usr_2", "theirs", "other user")
    assert set(memory.read(r, ws, "agt_A", "usr_1", reader=READER)["memory"]) == {"old", "new"}
    clock.advance(10 * 86400 + 1)  # 'old' is now 30 days and 1 s old
    assert memory.read(r, ws, "agt_A", "usr_1", reader=READER)["memory"] == {"new": "fresh"}  # hidden at once
    assert memory.read(r, ws, "agt_A", "usr_1", "old", reader=READER) == {"memory": {}, "withheld": 0}
    stored = {i.key for i in models.memory(r).scan()}
    assert stored == {"old", "new", "theirs"}  # the emulator's TTL never deletes...
    swept = reaper.sweep()
    assert swept["memory"] == {"us-east-1": 1, "eu-central-1": 0}
    assert {i.key for i in models.memory(r).scan()} == {"new", "theirs"}  # ...the sweep does
    assert memory.read(r, ws, "agt_A", "usr_2", reader=READER)["memory"] == {"theirs": "other user"}
    assert memory.read(r, ws, "agt_B", "usr_1", reader=READER)["memory"] == {}  # per agent


def test_memory_written_by_a_run_is_the_starting_users_and_readable_by_them_only(tenant: Tenant) -> None:
    demo.seed(tenant.workspace_id, tenant.region, tenant.email)
    user, other = member(tenant.workspace_id), member(tenant.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        start_run(c, user.token, agent["id"], {"topic": "orders", "sql": "SELECT 1 AS one"})
        deliver(tenant.region)
        assert call(c, "GET", f"/v1/agents/{agent['id']}/memory", user.token)[1] == {"memory": {"last_topic": "orders"}, "withheld": 0}
        assert call(c, "GET", f"/v1/agents/{agent['id']}/memory", other.token)[1] == {"memory": {}, "withheld": 0}
        assert call(c, "DELETE", f"/v1/agents/{agent['id']}/memory", user.token)[0] == 204
        assert call(c, "GET", f"/v1/agents/{agent['id']}/memory", user.token)[1] == {"memory": {}, "withheld": 0}


def test_definitions_crud(tenant: Tenant) -> None:
    user = member(tenant.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        assert agent["model"] == "auto"
        assert agent["version"] == 1
        assert agent["limits"]["max_steps"] == 6
        status, changed, _ = call(c, "PATCH", f"/v1/agents/{agent['id']}", user.token,
                                  {"name": "Renamed", "limits": {"max_tokens": 100}})
        assert status == 200
        assert changed["name"] == "Renamed"
        assert changed["version"] == 2
        assert changed["limits"] == {"max_steps": 6, "deadline": "PT10M", "max_tokens": 100}
        second = create_agent(c, tenant.token, {**DEMO_PLAN_AGENT, "name": "Second"})
        status, page, _ = call(c, "GET", "/v1/agents?limit=1", user.token)
        assert [a["id"] for a in page["agents"]] == [agent["id"]]
        assert page["has_more"]
        status, page2, _ = call(c, "GET", f"/v1/agents?limit=1&after={page['next_cursor']}", user.token)
        assert [a["id"] for a in page2["agents"]] == [second["id"]]
        assert not page2["has_more"]
        run = start_run(c, user.token, agent["id"], {"topic": "t", "sql": "SELECT 1"})[1]
        assert call(c, "DELETE", f"/v1/agents/{agent['id']}", user.token)[0] == 204
        assert call(c, "GET", f"/v1/agents/{agent['id']}", user.token)[0] == 404
        # its runs stay until deleted themselves
        assert [r["id"] for r in call(c, "GET", f"/v1/agents/{agent['id']}/runs", user.token)[1]["runs"]] == [run["id"]]
        assert call(c, "GET", f"/v1/agents/{agent['id']}/runs/{run['id']}", user.token)[0] == 200
        assert call(c, "GET", "/v1/agents/agt_01J0000000000000000000000Z/runs", user.token)[0] == 404
        status, bad, _ = call(c, "PATCH", f"/v1/agents/{second['id']}", user.token, {"tools": ["query"]})
        assert status == 400  # the plan uses tools that would no longer be allowed
        assert call(c, "GET", f"/v1/agents/{second['id']}", user.token)[1]["version"] == 1


def test_an_eu_workspaces_agents_runs_steps_and_memory_exist_only_in_eu_central_1(tenant: Tenant) -> None:
    eu = make_tenant("eu-owner@example.eu", residency="eu-central", name="EU Lab")
    assert eu.region == "eu-central-1"
    demo.seed(eu.workspace_id, eu.region, eu.email)
    user = member(eu.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        run = start_run(c, user.token, agent["id"], {"topic": "customers", "sql": "SELECT count(*) FROM orders"},
                        headers={"Idempotency-Key": "eu-run-1"})[1]
        assert queue_depth("us-east-1", QUEUE) == 0
        assert queue_depth("eu-central-1", QUEUE) == 1
        deliver("eu-central-1")
        assert get_run(c, user.token, agent["id"], run["id"])["status"] == "completed"
    for table in (t.name for t in TABLES if t.scope == REGIONAL):
        leaked = [i for i in stored_items("us-east-1", table) if eu.workspace_id in i or agent["id"] in i or run["id"] in i]
        assert not leaked, (table, leaked[:1])
    for table in AGENT_TABLES:
        assert [i for i in stored_items("eu-central-1", table) if eu.workspace_id in i], table
    assert queue_depth("us-east-1", QUEUE + "-dlq") == 0


def test_workspace_auto_expiry_removes_finished_runs_with_their_log(tenant: Tenant) -> None:
    token = user_token(tenant.user_id, tenant.email, tenant.workspace_id, "admin", ttl=30 * 86400)
    with platform_client() as c:
        status, ws, _ = call(c, "PATCH", f"/v1/workspaces/{tenant.workspace_id}", token,
                             {"agent_run_auto_expiry": "P7D"})
        assert status == 200
        assert ws["settings"]["agent_run_auto_expiry"] == "P7D"
        assert call(c, "PATCH", f"/v1/workspaces/{tenant.workspace_id}", token,
                    {"agent_run_auto_expiry": "P1Y"})[0] == 400
        agent = create_agent(c, token, {"name": "n", "tools": ["catalog_search"],
                                        "plan": [{"name": "a", "tool": "catalog_search", "input": {}}]})
        run = start_run(c, token, agent["id"], {})[1]
        assert run["expires_at"] is not None
        deliver(tenant.region)
        assert get_run(c, token, agent["id"], run["id"])["status"] == "completed"
        assert reaper.sweep()["runs"] == 0
        clock.advance(7 * 86400 + 1)
        assert reaper.sweep()["runs"] == 1
        assert call(c, "GET", f"/v1/agents/{agent['id']}/runs/{run['id']}", token)[0] == 404
    assert list(models.steps(tenant.region).query(models.run_key(tenant.workspace_id, run["id"]))) == []
