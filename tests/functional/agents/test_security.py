"""Tools act under the starting user's ACL and field policies; roles and tenancy on every agents route;
bad input is a 4xx problem that stores nothing."""
from __future__ import annotations

import json

import pytest

from chalicelib.agents import models
from chalicelib.gateway import demo
from chalicelib.gateway import models as gw_models
from chalicelib.gateway.catalog.service import invalidate
from tests.functional.agents.helpers import (
    DEMO_PLAN_AGENT,
    QUEUE,
    create_agent,
    deliver,
    get_run,
    member,
    platform_client,
    queue_depth,
    run_once,
    start_run,
)
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.platform.helpers import call


@pytest.fixture
def seeded(tenant: Tenant) -> Tenant:
    demo.seed(tenant.workspace_id, tenant.region, tenant.email)
    return tenant


def _restrict(t: Tenant, name: str, acl: list[dict[str, str]]) -> None:
    cls = gw_models.datasets(t.region)
    for ds in cls.query(t.workspace_id):
        if ds.name == name:
            ds.update(actions=[gw_models.DatasetAttrs.acl.set(json.dumps(acl))])
    invalidate(t.workspace_id)


def test_a_member_without_the_dataset_acl_cannot_read_it_through_the_query_tool(seeded: Tenant) -> None:
    allowed = member(seeded.workspace_id)
    denied = member(seeded.workspace_id)
    _restrict(seeded, "customers", [{"type": "user", "id": allowed.user_id}])
    agent_body = {"name": "q", "tools": ["query"], "plan": [
        {"name": "rows", "tool": "query", "input": {"sql": "SELECT count(*) AS n FROM customers"}}]}
    with platform_client() as c:
        agent = create_agent(c, denied.token, agent_body)  # the definition is shared; the data is not
        run_denied = start_run(c, denied.token, agent["id"], {})[1]
        run_allowed = start_run(c, allowed.token, agent["id"], {})[1]
        deliver(seeded.region)
        d = get_run(c, denied.token, agent["id"], run_denied["id"])
        a = get_run(c, allowed.token, agent["id"], run_allowed["id"])
    assert a["status"] == "completed"
    assert a["steps"][0]["output"]["rows"] == [[24]]
    assert d["status"] == "failed", d
    assert d["steps"][0]["status"] == "failed"
    assert d["steps"][0]["output"] is None
    assert "customers" in d["steps"][0]["error"]["message"].lower() or d["steps"][0]["error"]["code"] == "sql_error"
    assert d["output"] is None
    assert "[[24]]" not in json.dumps(d)


def test_a_member_without_the_dataset_acl_cannot_read_its_schema_or_find_it(seeded: Tenant) -> None:
    denied = member(seeded.workspace_id)
    _restrict(seeded, "customers", [{"type": "role", "id": "admin"}])
    body = {"name": "s", "tools": ["catalog_search", "dataset_schema"], "plan": [
        {"name": "find", "tool": "catalog_search", "input": {"query": "customers"}},
        {"name": "schema", "tool": "dataset_schema", "input": {"dataset": "customers"}}]}
    d = run_once(seeded.region, denied.token, body)
    assert d["steps"][0]["output"]["datasets"] == []
    assert d["status"] == "failed"
    assert d["steps"][1]["error"]["code"] == "not_found"
    assert "lifetime_value" not in json.dumps(d)
    assert "full_name" not in json.dumps(d)


def test_masked_fields_stay_masked_in_step_outputs_and_the_final_answer(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    body = {"name": "pii", "tools": ["query"], "plan": [
        {"name": "people", "tool": "query",
         "input": {"sql": "SELECT full_name, email, phone, city FROM customers ORDER BY customer_id LIMIT 5"}}]}
    done = run_once(seeded.region, user.token, body)
    assert done["status"] == "completed"
    raw_emails = [line.split(",")[2] for line in demo.customers_csv().splitlines()[1:6]]
    raw_names = [line.split(",")[1] for line in demo.customers_csv().splitlines()[1:6]]
    text = json.dumps(done)
    for secret in raw_emails + raw_names:
        assert secret not in text, secret
    rows = done["steps"][0]["output"]["rows"]
    assert all("*" in r[0] and "*" in r[1] and len(r[2]) == 64 for r in rows)
    assert "*****" in done["output"]["answer"]  # the answer quotes the masked values, not the raw ones


def test_viewers_read_definitions_but_cannot_start_runs_or_write(seeded: Tenant) -> None:
    viewer = member(seeded.workspace_id, "viewer")
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        assert call(c, "GET", f"/v1/agents/{agent['id']}", viewer.token)[0] == 200
        assert call(c, "GET", "/v1/agents", viewer.token)[0] == 200
        status, body, headers = call(c, "POST", f"/v1/agents/{agent['id']}/runs", viewer.token, {"input": {}})
        assert status == 403
        assert body["code"] == "forbidden"
        assert headers["Content-Type"] == "application/problem+json"
        assert call(c, "POST", "/v1/agents", viewer.token, DEMO_PLAN_AGENT)[0] == 403
        assert call(c, "PATCH", f"/v1/agents/{agent['id']}", viewer.token, {"name": "x"})[0] == 403
        assert call(c, "DELETE", f"/v1/agents/{agent['id']}", viewer.token)[0] == 403
    assert queue_depth(seeded.region, QUEUE) == 0


def test_a_token_of_another_workspace_gets_404_for_the_agent_and_its_runs(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    other = make_tenant("other-owner@example.com", name="Other")
    with platform_client() as c:
        agent = create_agent(c, user.token)
        run = start_run(c, user.token, agent["id"], {"topic": "customers", "sql": "SELECT 1"})[1]
        base = f"/v1/agents/{agent['id']}"
        for method, path, body in [("GET", base, None), ("PATCH", base, {"name": "x"}), ("DELETE", base, None),
                                   ("POST", base + "/runs", {"input": {"topic": "a", "sql": "SELECT 1"}}),
                                   ("GET", base + "/runs", None), ("GET", base + f"/runs/{run['id']}", None),
                                   ("POST", base + f"/runs/{run['id']}/cancel", None),
                                   ("GET", base + f"/runs/{run['id']}/events", None),
                                   ("DELETE", base + f"/runs/{run['id']}", None), ("GET", base + "/memory", None)]:
            status, answer, _ = call(c, method, path, other.token, body)
            assert status == 404, (method, path, answer)
            assert answer["code"] == "not_found", (method, path, answer)
        assert get_run(c, user.token, agent["id"], run["id"])["status"] == "queued"
        # another agent's id in the path does not reach this run either
        agent2 = create_agent(c, user.token)
        assert call(c, "GET", f"/v1/agents/{agent2['id']}/runs/{run['id']}", user.token)[0] == 404


@pytest.mark.parametrize("body,status,code", [
    ({"input": [1, 2]}, 400, "validation_failed"),
    ({"input": "text"}, 400, "validation_failed"),
    ({"input": {"topic": "x"}}, 400, "missing_input"),  # the plan names input.sql
    ({"input": {"topic": "x", "sql": "SELECT 1", "pad": "x" * 40_000}}, 413, "input_too_large"),
    ({"input": {"topic": "x", "sql": "SELECT 1"}, "extra": 1}, 400, "validation_failed"),
    ({"input": {"topic": "x", "sql": "SELECT 1"}, "agent_version": 0}, 400, "validation_failed"),
    ({"input": {"topic": "x", "sql": "SELECT 1"}, "agent_version": "1"}, 400, "validation_failed"),
    ({"input": {"topic": "x", "sql": "SELECT 1"}, "agent_version": 7}, 409, "agent_changed"),
])
def test_bad_run_input_is_a_problem_and_stores_nothing(seeded: Tenant, body: dict, status: int, code: str) -> None:
    user = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, user.token)
        got, answer, headers = call(c, "POST", f"/v1/agents/{agent['id']}/runs", user.token, body)
        assert (got, answer["code"]) == (status, code), answer
        assert headers["Content-Type"] == "application/problem+json"
        assert answer["correlation_id"]
        got, answer, _ = call(c, "POST", f"/v1/agents/{agent['id']}/runs", user.token, raw="{not json")
        assert got == 400
        assert answer["code"] == "malformed_json"
    assert list(models.runs(seeded.region).query(seeded.workspace_id)) == []
    assert queue_depth(seeded.region, QUEUE) == 0


def test_unknown_agents_are_404(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    with platform_client() as c:
        for agent_id in ("agt_01J0000000000000000000000Z", "nope", "agt_01J0000000000000000000000Z%27"):
            status, answer, _ = call(c, "POST", f"/v1/agents/{agent_id}/runs", user.token, {"input": {}})
            assert status == 404
            assert answer["code"] == "not_found"
    assert list(models.runs(seeded.region).query(seeded.workspace_id)) == []


@pytest.mark.parametrize("change,field", [
    ({"tools": ["query", "shell"]}, "tools[1]"),
    ({"plan": [{"name": "a", "tool": "knowledge_search", "input": {"query": "x"}}]}, "plan[0].tool"),
    ({"plan": [{"name": "a", "tool": "query", "input": {"sql": "{{steps.b.output.x}}"}},
               {"name": "b", "tool": "query", "input": {"sql": "SELECT 1"}}]}, "plan[0].input"),
    ({"plan": [{"name": "a", "tool": "query", "input": {"sql": "{{secrets.key}}"}}]}, "plan[0].input"),
    ({"plan": [{"name": "a", "tool": "query", "input": {"sqll": "SELECT 1"}}]}, "plan[0].input.sqll"),
    ({"plan": [{"name": "a", "tool": "query", "input": {}}]}, "plan[0].input.sql"),
    ({"limits": {"deadline": "P1D"}}, "deadline"),
    ({"limits": {"max_steps": 1}, "plan": [{"name": "a", "tool": "query", "input": {"sql": "SELECT 1"}},
                                           {"name": "b", "tool": "query", "input": {"sql": "SELECT 2"}}]}, "plan"),
    ({"model": "bad model id!"}, "model"),
    ({"model": "nowhere/gpt-x"}, "model"),
])
def test_bad_definitions_are_refused_and_store_nothing(seeded: Tenant, change: dict, field: str) -> None:
    user = member(seeded.workspace_id)
    body = {"name": "x", "tools": ["query"], "plan": [{"name": "a", "tool": "query", "input": {"sql": "SELECT 1"}}],
            **change}
    with platform_client() as c:
        status, answer, _ = call(c, "POST", "/v1/agents", user.token, body)
    assert status == 400, answer
    assert field in {e["field"] for e in answer["errors"]}, answer
    assert list(models.agents(seeded.region).query(seeded.workspace_id)) == []


def test_a_step_template_naming_a_missing_output_fails_the_run_with_a_clear_reason(seeded: Tenant) -> None:
    user = member(seeded.workspace_id)
    body = {"name": "t", "tools": ["catalog_search", "dataset_schema"], "plan": [
        {"name": "find", "tool": "catalog_search", "input": {"query": "no-such-thing"}},
        {"name": "schema", "tool": "dataset_schema", "input": {"dataset": "{{steps.find.output.datasets.0.id}}"}}]}
    done = run_once(seeded.region, user.token, body)
    assert done["status"] == "failed"
    assert done["error"]["code"] == "template_value_missing"
    assert "steps.find.output.datasets.0.id" in done["error"]["message"]


def test_a_run_names_the_last_edit_and_refuses_a_definition_changed_since_it_was_reviewed(seeded: Tenant) -> None:
    """A Member edits an agent an Admin runs: the definition says who edited it last; an Admin who
    reviewed version 1 and starts it after the edit gets 409 naming the editor, and nothing runs; started
    with the version she then reviewed, the run records the definition it used."""
    author = member(seeded.workspace_id)
    with platform_client() as c:
        agent = create_agent(c, seeded.token)
        assert agent["version"] == 1 and agent["updated_by"]["email"] == seeded.email
        status, edited, _ = call(c, "PATCH", f"/v1/agents/{agent['id']}", author.token,
                                 {"instructions": "Answer in the voice of a pirate."})
        assert status == 200, edited
        assert edited["version"] == 2
        assert edited["updated_by"] == {"user_id": author.user_id, "email": author.email}
        body = {"input": {"topic": "customers", "sql": "SELECT 1"}, "agent_version": 1}
        status, refused, _ = call(c, "POST", f"/v1/agents/{agent['id']}/runs", seeded.token, body)
        assert (status, refused["code"]) == (409, "agent_changed"), refused
        assert author.email in refused["detail"] and "version 2" in refused["detail"]
        assert list(models.runs(seeded.region).query(seeded.workspace_id)) == []
        assert queue_depth(seeded.region, QUEUE) == 0
        status, run, _ = call(c, "POST", f"/v1/agents/{agent['id']}/runs", seeded.token, {**body, "agent_version": 2})
        assert status == 202, run
        assert run["agent"]["version"] == 2 and run["agent"]["updated_by"]["email"] == author.email
        # a later edit does not change what the queued run will do or what it says it used
        assert call(c, "PATCH", f"/v1/agents/{agent['id']}", seeded.token, {"instructions": "Be brief."})[0] == 200
        assert get_run(c, seeded.token, agent["id"], run["id"])["agent"]["version"] == 2
