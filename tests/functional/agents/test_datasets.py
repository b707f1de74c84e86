"""An agent limited to the datasets its builder ticked.

On write (``POST``/``PATCH /v1/agents``): ids are canonicalised and repeats dropped; an id of another
workspace, of a dataset the editor cannot read, of nothing, or not an id at all is a 400 naming it with
nothing saved; at most 50. At run time (the worker, a scripted tool-calling model): the tools read only
the ticked datasets, and of those only what the running user may read; a query naming an unticked
dataset, alone or joined to a ticked one, is a failed step the model is told about; a ticked dataset
deleted later is skipped with a note, and an agent whose every dataset is gone reads nothing (the empty
scope never widens to "every dataset").
"""
from __future__ import annotations

from typing import Any

import pytest

from chalicelib.core.authz import Principal
from chalicelib.core.http.errors import ApiError
from chalicelib.core.tenancy import scope_of
from chalicelib.gateway.catalog import service as catalog
from chalicelib.gateway.ingest import connectors
from chalicelib.gateway.models import connectors as connector_table
from chalicelib.knowledge import indexer
from tests.functional.agents.helpers import create_agent, member, platform_client, run_once
from tests.functional.agents.scripted_model import ScriptedModel
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.gateway.data import field, put_dataset
from tests.functional.knowledge.helpers import put_keyed
from tests.functional.platform.helpers import call


def admin_of(t: Tenant) -> Principal:
    return Principal(user_id=t.user_id, workspace_id=t.workspace_id, roles=("admin",), email=t.email,
                     amr=("pwd",), token_id="test")


def dataset_id(t: Tenant, name: str) -> str:
    return catalog.readable_by_name(scope_of(admin_of(t)), {name})[0].id


def agent(tools: list[str], datasets: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    body = {"name": "scoped", "instructions": "Answer questions about orders.", "model": "auto", "tools": tools,
            "limits": {"max_steps": 8, "deadline": "PT5M", "max_tokens": 20000}, **extra}
    if datasets is not None:
        body["datasets"] = datasets
    return body


def steps_of(done: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(s["tool"], s["status"], (s.get("error") or {}).get("code")) for s in done["steps"]]


def agent_count(t: Tenant, token: str) -> int:
    with platform_client() as c:
        return len(call(c, "GET", "/v1/agents", token)[1]["agents"])


# --- validation on write ------------------------------------------------------------------------------

def test_ids_are_canonicalised_and_kept_and_absent_means_every_dataset(seeded: Tenant) -> None:
    orders, customers = dataset_id(seeded, "orders"), dataset_id(seeded, "customers")
    user = member(seeded.workspace_id)
    messy = ["  " + orders.lower() + " ", orders, customers.replace("ds_", "DS_")]
    with platform_client() as c:
        made = create_agent(c, user.token, agent(["query"], messy))
        assert made["datasets"] == [orders, customers]
        status, got, _ = call(c, "GET", f"/v1/agents/{made['id']}", user.token)
        assert status == 200 and got["datasets"] == [orders, customers]
        plain = create_agent(c, user.token, agent(["query"]))
        assert plain["datasets"] == []
        status, patched, _ = call(c, "PATCH", f"/v1/agents/{made['id']}", user.token, {"datasets": []})
        assert status == 200 and patched["datasets"] == [] and patched["version"] == 2


def test_foreign_unreadable_unknown_and_malformed_ids_are_refused_naming_them(seeded: Tenant) -> None:
    other = make_tenant("other-owner@example.com", name="Other")
    foreign = put_dataset(other.workspace_id, other.region, "orders", [field("order_id", "INTEGER")], [(1,)])
    payroll = put_dataset(seeded.workspace_id, seeded.region, "payroll", [field("salary", "INTEGER")], [(9,)],
                          acl=[{"type": "role", "id": "admin"}])
    orders = dataset_id(seeded, "orders")
    user = member(seeded.workspace_id)
    before = agent_count(seeded, user.token)
    with platform_client() as c:
        for bad in (foreign, payroll, "ds_01ARZ3NDEKTSV4RRFFQ69G5FAV"):
            status, problem, _ = call(c, "POST", "/v1/agents", user.token, agent(["query"], [orders, bad]))
            assert status == 400, problem
            assert problem["code"] == "validation_failed" and bad in problem["detail"]
            assert problem["errors"] == [{"field": "datasets[1]",
                                          "message": f"{bad} is not a dataset of this workspace that you may read"}]
        for bad_value in ("orders", 42, None, "ds_../../x"):
            status, problem, _ = call(c, "POST", "/v1/agents", user.token, agent(["query"], [bad_value]))
            assert status == 400 and problem["errors"][0]["field"] == "datasets[0]", problem
        status, problem, _ = call(c, "POST", "/v1/agents", user.token, agent(["query"], [orders] * 51))
        assert status == 400 and problem["errors"][0]["field"] == "datasets", problem
        status, problem, _ = call(c, "POST", "/v1/agents", user.token, {**agent(["query"]), "datasets": orders})
        assert status == 400, problem
    assert agent_count(seeded, user.token) == before  # nothing saved

    # the Admin may limit an agent to payroll; a Member's later edit keeps it (held ids are not re-checked)
    # but cannot add it to another agent, and a refused PATCH changes nothing
    with platform_client() as c:
        made = create_agent(c, seeded.token, agent(["query"], [payroll, orders]))
        status, edited, _ = call(c, "PATCH", f"/v1/agents/{made['id']}", user.token, {"name": "renamed"})
        assert status == 200 and edited["datasets"] == [payroll, orders]
        status, edited, _ = call(c, "PATCH", f"/v1/agents/{made['id']}", user.token, {"datasets": [orders, payroll]})
        assert status == 200 and edited["datasets"] == [orders, payroll]
        mine = create_agent(c, user.token, agent(["query"], [orders]))
        status, problem, _ = call(c, "PATCH", f"/v1/agents/{mine['id']}", user.token,
                                  {"name": "widened", "datasets": [orders, payroll]})
        assert status == 400 and payroll in problem["detail"], problem
        status, kept, _ = call(c, "GET", f"/v1/agents/{mine['id']}", user.token)
        assert (kept["name"], kept["datasets"], kept["version"]) == ("scoped", [orders], 1)


# --- enforcement at run time --------------------------------------------------------------------------

def test_a_query_naming_an_unticked_dataset_is_a_failed_step_the_model_sees(seeded: Tenant,
                                                                             model: ScriptedModel) -> None:
    orders = dataset_id(seeded, "orders")
    user = member(seeded.workspace_id)
    model.turns = [{"tool": "query", "input": {"sql": "SELECT count(*) AS n FROM customers"}},
                   {"tool": "query", "input": {"sql": "SELECT o.order_id, c.email FROM orders o "
                                                      "JOIN customers c USING (customer_id) LIMIT 1"}},
                   {"tool": "query", "input": {"sql": "SELECT * FROM (SELECT 1) t, \"Customers\""}},
                   {"tool": "catalog_search", "input": {}},
                   {"tool": "dataset_schema", "input": {"dataset": "customers"}},
                   {"tool": "query", "input": {"sql": "SELECT count(*) AS n FROM orders"}},
                   {"answer": "There are 72 orders."}]
    done = run_once(seeded.region, user.token, agent(["query", "catalog_search", "dataset_schema"], [orders]),
                    {"question": "How many orders, and who placed them?"})
    assert done["status"] == "completed", done
    assert steps_of(done) == [("query", "failed", "dataset_not_allowed"), ("query", "failed", "dataset_not_allowed"),
                              ("query", "failed", "dataset_not_allowed"), ("catalog_search", "completed", None),
                              ("dataset_schema", "failed", "not_found"), ("query", "completed", None)]
    assert "may not read customers; it may read only orders" in done["steps"][0]["error"]["message"]
    assert [d["name"] for d in done["steps"][3]["output"]["datasets"]] == ["orders"]
    assert done["steps"][3]["output"]["total_count"] == 1
    assert done["steps"][5]["output"]["rows"] == [[72]] and "skipped_datasets" not in done["steps"][5]["output"]
    told = [m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert "dataset_not_allowed" in told[0] and "customers" in told[0]
    assert all("email" not in str(s.get("output")) for s in done["steps"])  # nothing of customers was read


def test_the_ticked_list_never_widens_what_the_runner_may_read(seeded: Tenant, model: ScriptedModel) -> None:
    payroll = put_dataset(seeded.workspace_id, seeded.region, "payroll", [field("salary", "INTEGER")], [(91357,)],
                          acl=[{"type": "role", "id": "admin"}])
    orders = dataset_id(seeded, "orders")
    with platform_client() as c:  # the Admin builds it with payroll; a Member runs it
        made = create_agent(c, seeded.token, agent(["query", "catalog_search"], [payroll, orders]))
    user = member(seeded.workspace_id)
    model.turns = [{"tool": "query", "input": {"sql": "SELECT salary FROM payroll"}},
                   {"tool": "catalog_search", "input": {}},
                   {"tool": "query", "input": {"sql": "SELECT count(*) AS n FROM orders"}},
                   {"answer": "done"}]
    from tests.functional.agents.helpers import deliver, get_run, start_run

    with platform_client() as c:
        run = start_run(c, user.token, made["id"], {"question": "salaries?"})[1]
        deliver(seeded.region)
        done = get_run(c, user.token, made["id"], run["id"])
    assert done["status"] == "completed", done
    assert steps_of(done) == [("query", "failed", "sql_error"), ("catalog_search", "completed", None),
                              ("query", "completed", None)]
    assert "91357" not in str(done)
    assert [d["name"] for d in done["steps"][1]["output"]["datasets"]] == ["orders"]
    assert done["steps"][2]["output"]["skipped_datasets"] == [
        {"id": payroll, "message": f"Dataset {payroll} is skipped: it no longer exists or the user running the "
                                   "agent may not read it."}]


def test_a_ticked_dataset_deleted_later_is_skipped_and_an_emptied_scope_reads_nothing(
        seeded: Tenant, model: ScriptedModel) -> None:
    orders, customers = dataset_id(seeded, "orders"), dataset_id(seeded, "customers")
    user = member(seeded.workspace_id)
    with platform_client() as c:
        both = create_agent(c, user.token, agent(["query"], [orders, customers]))
        only_customers = create_agent(c, user.token, agent(["query"], [customers]))
    conn = next(i for i in connector_table(seeded.region).query(seeded.workspace_id) if i.dataset_name == "customers")
    connectors.delete_connector(scope_of(admin_of(seeded)), conn.id, None)

    from tests.functional.agents.helpers import deliver, get_run, start_run

    model.turns = [{"tool": "query", "input": {"sql": "SELECT count(*) AS n FROM orders"}}, {"answer": "72"},
                   {"tool": "query", "input": {"sql": "SELECT count(*) AS n FROM orders"}}, {"answer": "none"}]
    with platform_client() as c:
        first = start_run(c, user.token, both["id"], {"question": "How many orders?"})[1]
        deliver(seeded.region)
        done = get_run(c, user.token, both["id"], first["id"])
        assert done["status"] == "completed", done
        assert done["steps"][0]["output"]["rows"] == [[72]]
        assert [s["id"] for s in done["steps"][0]["output"]["skipped_datasets"]] == [customers]
        second = start_run(c, user.token, only_customers["id"], {"question": "How many orders?"})[1]
        deliver(seeded.region)
        done = get_run(c, user.token, only_customers["id"], second["id"])
    assert done["status"] == "completed", done
    assert steps_of(done) == [("query", "failed", "dataset_not_allowed")]  # not every dataset: none
    assert done["steps"][0]["error"]["message"].endswith("it may read only no dataset now.")


def test_knowledge_search_reads_only_the_ticked_datasets(seeded: Tenant, model: ScriptedModel) -> None:
    ws, region = seeded.workspace_id, seeded.region
    ticked = put_keyed(ws, region, "faq", [field("topic"), field("body")], [("refunds", "Refunds take 5 days.")])
    other = put_keyed(ws, region, "secrets", [field("topic"), field("body")],
                      [("refunds", "Refunds marker-unticked-4471.")])
    for ds in (ticked, other):
        indexer.index_dataset(region, ws, ds)
    user = member(ws)
    model.turns = [{"tool": "knowledge_search", "input": {"query": "refunds"}}, {"answer": "5 days"}]
    done = run_once(region, user.token, agent(["knowledge_search"], [ticked]), {"question": "refunds?"})
    assert done["status"] == "completed", done
    passages = done["steps"][0]["output"]["passages"]
    assert passages and all("marker-unticked-4471" not in p["text"] for p in passages)
    assert "marker-unticked-4471" not in str(done) and "marker-unticked-4471" not in str(model.requests)
    # unscoped, the same search finds both (the restriction is what kept it out)
    model.turns = [{"tool": "knowledge_search", "input": {"query": "refunds"}}, {"answer": "5 days"}]
    done = run_once(region, user.token, agent(["knowledge_search"]), {"question": "refunds?"})
    assert "marker-unticked-4471" in str(done["steps"][0]["output"])


# --- the scope in the reader itself -------------------------------------------------------------------

def test_a_dataset_scope_narrows_every_reader_entry_point_and_never_widens(seeded: Tenant) -> None:
    from dataclasses import replace

    from chalicelib.gateway import reader

    payroll = put_dataset(seeded.workspace_id, seeded.region, "payroll", [field("salary", "INTEGER")], [(1,)],
                          acl=[{"type": "role", "id": "admin"}])
    orders, customers = dataset_id(seeded, "orders"), dataset_id(seeded, "customers")
    user = Principal(user_id="usr_scoped", workspace_id=seeded.workspace_id, roles=("member",), email="m@example.com",
                     amr=("pwd",), token_id="t")
    user_scope = scope_of(user)
    scoped = replace(user_scope, principal=replace(user, datasets=frozenset({orders, payroll,
                                                                              "ds_01ARZ3NDEKTSV4RRFFQ69G5FAV"})))
    assert [v.rec.id for v in reader.readable(scoped)] == [orders]  # payroll: the ACL still says no
    assert [v.rec.name for v in reader.by_name(scoped, {"orders", "customers", "payroll"})] == ["orders"]
    assert catalog.record(scoped, orders).id == orders
    for hidden in (customers, payroll):
        with pytest.raises(ApiError) as refused:
            catalog.record(scoped, hidden)
        assert refused.value.status == 404
    page = catalog.search(scoped, catalog.SearchFilters())
    assert [d["id"] for d in page["items"]] == [orders] and page["total_count"] == 1
    assert catalog.search(user_scope, catalog.SearchFilters())["total_count"] >= 2  # unscoped: the same user sees more
    nothing = replace(user_scope, principal=replace(user, datasets=frozenset({"ds_01ARZ3NDEKTSV4RRFFQ69G5FAV"})))  # every ticked dataset gone
    assert reader.readable(nothing) == [] and catalog.search(nothing, catalog.SearchFilters())["total_count"] == 0
