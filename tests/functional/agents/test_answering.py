"""With a tool-capable model the model chooses the tool calls (bounded loop); the knowledge tool acts
under the starting user's ACL.

A deterministic model is needed to choose given calls, so the model is a scripted OpenAI-compatible HTTP
server on loopback (``scripted_model.py``, a test double of the model only; the real llama.cpp server
runs in tests/integration/models). Everything else (registry, routing, the OpenAI-compatible provider,
the worker, the ledger, the tools) is the real code.
"""
from __future__ import annotations

import json

from chalicelib.gateway import models as gw_models
from chalicelib.gateway.catalog.service import invalidate
from tests.functional.agents.helpers import create_agent, deliver, get_run, member, platform_client, run_once, start_run
from tests.functional.agents.scripted_model import ScriptedModel
from tests.functional.conftest import Tenant

AGENT = {"name": "chooser", "instructions": "Use the tools to answer.", "model": "auto",
         "tools": ["catalog_search", "query", "knowledge_search"],
         "limits": {"max_steps": 4, "deadline": "PT5M", "max_tokens": 5000}}


def test_a_tool_capable_model_chooses_the_calls_in_a_bounded_loop(seeded: Tenant, model: ScriptedModel) -> None:
    model.turns = [{"tool": "catalog_search", "input": {"query": "orders"}},
                   {"tool": "shell", "input": {"cmd": "id"}},  # refused: not allowed, the model is told
                   {"tool": "query", "input": {"sql": "SELECT count(*) AS n FROM orders"}},
                   {"answer": "There are 72 orders."}]
    user = member(seeded.workspace_id)
    done = run_once(seeded.region, user.token, AGENT, {"question": "How many orders are there?"})
    assert done["status"] == "completed", done
    assert done["output"]["answer"] == "There are 72 orders."
    assert done["output"]["model"] == "local/tool-model"
    assert [(s["tool"], s["status"]) for s in done["steps"]] == [
        ("catalog_search", "completed"), ("shell", "failed"), ("query", "completed")]
    assert done["steps"][2]["output"]["rows"] == [[72]]
    assert done["usage"]["input_tokens"] == 200
    assert done["usage"]["output_tokens"] == 40
    # native tool calling: the allowed tools were offered with their schemas, nothing else
    first = model.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == AGENT["tools"]
    assert first["tools"][1]["function"]["parameters"]["required"] == ["sql"]
    # the model saw the tool results as tool messages marked as data, including the refusal
    last = model.requests[-1]["messages"]
    assert [m["role"] for m in last[-6:]] == ["assistant", "tool", "assistant", "tool", "assistant", "tool"]
    assert last[-5]["tool_call_id"] == "call_0" and last[-5]["content"].startswith("<<DATA ")
    assert "tool_not_allowed" in last[-3]["content"]
    assert "[[72]]" in last[-1]["content"].replace(" ", "")


def test_the_loop_is_bounded_by_max_steps(seeded: Tenant, model: ScriptedModel) -> None:
    model.turns = [{"tool": "catalog_search", "input": {}} for _ in range(10)]
    user = member(seeded.workspace_id)
    done = run_once(seeded.region, user.token, AGENT)
    assert done["status"] == "failed"
    assert done["error"]["code"] == "max_steps_exceeded"
    assert len(done["steps"]) == 4
    assert len(model.requests) == 5


def test_the_knowledge_tool_does_not_read_a_dataset_outside_the_users_acl(seeded: Tenant) -> None:
    cls = gw_models.datasets(seeded.region)
    for ds in cls.query(seeded.workspace_id):
        if ds.name == "customers":
            ds.update(actions=[gw_models.DatasetAttrs.acl.set(json.dumps([{"type": "role", "id": "admin"}]))])
    invalidate(seeded.workspace_id)
    user = member(seeded.workspace_id)
    body = {"name": "k", "tools": ["knowledge_search"],
            "plan": [{"name": "search", "tool": "knowledge_search", "input": {"query": "{{input.question}}", "limit": 10}}]}
    with platform_client() as c:
        agent = create_agent(c, user.token, body)
        mine = start_run(c, user.token, agent["id"], {"question": "Lisbon Berlin customer plan enterprise"})[1]
        admin = start_run(c, seeded.token, agent["id"], {"question": "Lisbon Berlin customer plan enterprise"})[1]
        deliver(seeded.region)
        denied = get_run(c, user.token, agent["id"], mine["id"])
        allowed = get_run(c, seeded.token, agent["id"], admin["id"])
    assert allowed["status"] == "completed"
    admin_sources = {p["citation"]["source"]["dataset_name"] for p in allowed["steps"][0]["output"]["passages"]}
    assert "customers" in admin_sources  # the data is there for someone allowed to read it
    member_sources = {p["citation"]["source"]["dataset_name"] for p in denied["steps"][0]["output"]["passages"]}
    assert "customers" not in member_sources
    assert "Lovelace" not in json.dumps(denied)
    assert "Lovelace" not in json.dumps(allowed)  # full_name stays masked


FORM_DEFAULTS = {"name": "Returns helper", "instructions": "", "model": "auto", "tools": ["knowledge_search"]}


def test_an_agent_from_the_form_defaults_runs_first_time_without_a_model(seeded: Tenant) -> None:
    """The web form's defaults (knowledge_search, no plan) and its pre-filled input ``{}``."""
    user = member(seeded.workspace_id)
    done = run_once(seeded.region, user.token, FORM_DEFAULTS, {})
    assert done["status"] == "completed", done
    assert [s["tool"] for s in done["steps"]] == ["knowledge_search"]
    assert done["steps"][0]["input"] == {"query": "Returns helper"}  # no question: the agent's name
    assert done["output"]["provider"] == "extractive" and "No tool-capable model" in done["output"]["note"]


def test_an_agent_from_the_form_defaults_runs_first_time_with_a_model(seeded: Tenant, model: ScriptedModel) -> None:
    model.turns = [{"tool": "knowledge_search", "input": {"query": "returns"}}, {"answer": "Within 30 days."}]
    user = member(seeded.workspace_id)
    done = run_once(seeded.region, user.token, FORM_DEFAULTS, {})
    assert done["status"] == "completed", done
    assert done["output"] == {**done["output"], "answer": "Within 30 days.", "model": "local/tool-model"}
    assert [s["tool"] for s in done["steps"]] == ["knowledge_search"]
