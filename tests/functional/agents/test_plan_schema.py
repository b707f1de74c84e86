"""A plan step's ``input`` is stated exactly in the platform's OpenAPI document and the server checks the
same schema: the document holds what ``chalicelib/agents/plan_schema.py`` derives from the tools' fields,
a JSON Schema validator and the server give the same verdict on each step below, and over HTTP an
unknown or ill-typed input field is a 400 problem that stores nothing."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from chalicelib.agents import definitions, models, plan_schema
from chalicelib.agents.tools import TOOL_NAMES
from chalicelib.core.http.openapi import load
from tests.functional.agents.helpers import member, platform_client
from tests.functional.conftest import Tenant
from tests.functional.platform.helpers import call

DOCUMENT = load(Path(definitions.__file__).parents[1] / "platform" / "openapi.yaml")
SCHEMAS = DOCUMENT["components"]["schemas"]


def test_the_document_states_the_schemas_derived_from_the_tools() -> None:
    for name, schema in plan_schema.component_schemas().items():
        assert SCHEMAS.get(name) == schema, name
    assert SCHEMAS["ToolName"]["enum"] == list(TOOL_NAMES)
    for body in ("AgentCreate", "AgentPatch", "Agent"):
        assert SCHEMAS[body]["properties"]["plan"]["items"] == {"$ref": "#/components/schemas/PlanStep"}


# The JSON Schema validator Schemathesis checks its cases with; its patterns match as ECMA-262's do.
PLAN_STEP = jsonschema_rs.Draft202012Validator({"$ref": "#/components/schemas/PlanStep",
                                                "components": DOCUMENT["components"]})


def _document_accepts(step: Any) -> bool:
    return PLAN_STEP.is_valid(step)


def _server_accepts(step: Any) -> bool:
    """The server's verdict on ``step`` following a step ``b`` (so its templates may name ``steps.b``)."""
    return definitions.check_plan([{"name": "b", "tool": "catalog_search"}, step], list(TOOL_NAMES), 50) == []


LONG = "x" * 1001
STEPS: list[tuple[dict[str, Any], bool]] = [
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1"}}, True),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "limit": 200}}, True),
    ({"name": "a", "tool": "query", "input": {"sql": "{{input.sql}}", "limit": "{{input.n}}"}}, True),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "limit": "{{ input.page.size }}"}}, True),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "limit": "{{steps.b.output.rows.0}}"}}, True),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "limit": " {{input.n}}"}}, False),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "limit": "{{secrets.n}}"}}, False),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "limit": 201}}, False),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "limit": 0}}, False),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "limit": True}}, False),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "limit": "10"}}, False),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "limit": "{{input.n}} rows"}}, False),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "limit": "{{input.n}}\n"}}, False),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "limit": None}}, False),
    ({"name": "a", "tool": "query", "input": {"sql": ""}}, False),
    ({"name": "a", "tool": "query", "input": {"sql": 1}}, False),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1", "query": "x"}}, False),
    ({"name": "a", "tool": "query", "input": {}}, False),
    ({"name": "a", "tool": "query"}, False),
    ({"name": "a", "tool": "query", "input": None}, False),
    ({"name": "a", "tool": "query", "input": {"sql": "SELECT 1"}, "extra": 1}, False),
    ({"name": "1a", "tool": "query", "input": {"sql": "SELECT 1"}}, False),
    ({"name": "a\n", "tool": "query", "input": {"sql": "SELECT 1"}}, False),
    ({"name": "a", "tool": "shell", "input": {}}, False),
    ({"name": "a", "tool": "knowledge_search", "input": {"query": "refunds", "limit": 20}}, True),
    ({"name": "a", "tool": "knowledge_search", "input": {"query": LONG}}, False),
    ({"name": "a", "tool": "knowledge_search", "input": {"limit": 5}}, False),
    ({"name": "a", "tool": "catalog_search"}, True),
    ({"name": "a", "tool": "catalog_search", "input": {}}, True),
    ({"name": "a", "tool": "catalog_search", "input": {"query": "", "limit": 25}}, True),
    ({"name": "a", "tool": "catalog_search", "input": {"limit": 26}}, False),
    ({"name": "a", "tool": "catalog_search", "input": {"sql": "SELECT 1"}}, False),
    ({"name": "a", "tool": "dataset_schema", "input": {"dataset": "orders"}}, True),
    ({"name": "a", "tool": "dataset_schema", "input": {"dataset": "x" * 129}}, False),
    ({"name": "a", "tool": "memory_read"}, True),
    ({"name": "a", "tool": "memory_read", "input": {"key": "topic ✓"}}, True),
    ({"name": "a", "tool": "memory_read", "input": {"key": "a\tb"}}, False),
    ({"name": "a", "tool": "memory_read", "input": {"key": "a\x85"}}, False),
    ({"name": "a", "tool": "memory_read", "input": {"key": ""}}, False),
    ({"name": "a", "tool": "memory_write", "input": {"key": "k", "value": {"any": ["json", 1]}}}, True),
    ({"name": "a", "tool": "memory_write", "input": {"key": "k", "value": 1.5}}, True),
    ({"name": "a", "tool": "memory_write", "input": {"key": "k", "value": None}}, False),
    ({"name": "a", "tool": "memory_write", "input": {"key": "k"}}, False),
]


@pytest.mark.parametrize("step,valid", STEPS)
def test_the_document_and_the_server_agree_on_each_step(step: dict[str, Any], valid: bool) -> None:
    assert _document_accepts(step) is valid
    assert _server_accepts(step) is valid


@pytest.mark.parametrize("step_input,field", [
    ({"sql": "SELECT 1", "sqll": "SELECT 1"}, "plan[0].input.sqll"),
    ({"sql": "SELECT 1", "limit": "ten"}, "plan[0].input.limit"),
    ({"sql": "SELECT 1", "limit": 1000}, "plan[0].input.limit"),
])
def test_a_bad_step_input_is_a_400_problem_and_stores_nothing(tenant: Tenant, step_input: dict[str, Any],
                                                               field: str) -> None:
    user = member(tenant.workspace_id)
    body = {"name": "x", "tools": ["query"], "plan": [{"name": "a", "tool": "query", "input": step_input}]}
    with platform_client() as c:
        status, answer, headers = call(c, "POST", "/v1/agents", user.token, body)
    assert status == 400, answer
    assert headers["Content-Type"] == "application/problem+json"
    assert answer["code"] == "validation_failed"
    assert answer["correlation_id"]
    assert field in {e["field"] for e in answer["errors"]}, answer
    assert list(models.agents(tenant.region).query(tenant.workspace_id)) == []


def test_a_template_in_a_number_field_is_stored_and_an_update_checks_the_same_schema(tenant: Tenant) -> None:
    user = member(tenant.workspace_id)
    step = {"name": "a", "tool": "query", "input": {"sql": "{{input.sql}}", "limit": "{{input.n}}"}}
    with platform_client() as c:
        status, agent, _ = call(c, "POST", "/v1/agents", user.token, {"name": "x", "tools": ["query"], "plan": [step]})
        assert status == 201, agent
        assert agent["plan"] == [step]
        bad = {"plan": [{**step, "input": {"sql": "SELECT 1", "rows": 5}}]}
        status, answer, _ = call(c, "PATCH", f"/v1/agents/{agent['id']}", user.token, bad)
        assert status == 400, answer
        assert "plan[0].input.rows" in {e["field"] for e in answer["errors"]}
        status, again, _ = call(c, "GET", f"/v1/agents/{agent['id']}", user.token)
    assert again["plan"] == [step]
    assert again["version"] == 1


def test_the_agent_tools_route_answers_the_catalogue_as_the_document_states(tenant: Tenant) -> None:
    """``GET /v1/agents/tools``: every agent tool of the catalogue, in its order, with the arguments' schema
    a model's call is checked against; the answer fits the document's ``AgentTool``; no token: 401."""
    from chalicelib import tool_catalog  # noqa: PLC0415

    viewer = member(tenant.workspace_id, "viewer")
    tool = jsonschema_rs.Draft202012Validator({"$ref": "#/components/schemas/AgentTool",
                                               "components": DOCUMENT["components"]})
    with platform_client() as c:
        status, answer, _ = call(c, "GET", "/v1/agents/tools", viewer.token)
        assert call(c, "GET", "/v1/agents/tools")[0] == 401
    assert status == 200, answer
    assert [t["name"] for t in answer["tools"]] == list(TOOL_NAMES) == [
        s.name for s in tool_catalog.on(tool_catalog.AGENTS)]
    assert all(tool.is_valid(t) for t in answer["tools"])
    by_name = {t["name"]: t for t in answer["tools"]}
    assert by_name["memory_write"]["writes"] is True and by_name["query"]["writes"] is False
    assert by_name["query"]["arguments"]["required"] == ["sql"]
    assert by_name["query"]["arguments"]["properties"]["limit"] == {"type": "integer", "minimum": 1, "maximum": 200}
    assert by_name["knowledge_search"]["title"] == "Search documents and data"
