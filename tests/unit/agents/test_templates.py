"""Step input templates: whole-value references keep their type, embedded ones become text, missing
values are refused, and the plan check names each missing run input."""
from __future__ import annotations

import pytest

from chalicelib.agents import templates
from chalicelib.agents.runtime.answering import parse_action

SCOPE = {"input": {"q": "orders", "n": 3}, "steps": {"find": {"output": {"datasets": [{"id": "ds_1", "n": 2}]}}}}


def test_whole_references_keep_their_type_and_embedded_ones_become_text() -> None:
    assert templates.render("{{input.n}}", SCOPE) == 3
    assert templates.render({"a": ["{{ steps.find.output.datasets.0 }}"]}, SCOPE) == {"a": [{"id": "ds_1", "n": 2}]}
    assert templates.render("SELECT * FROM {{input.q}} LIMIT {{input.n}}", SCOPE) == "SELECT * FROM orders LIMIT 3"
    assert templates.render("no templates", SCOPE) == "no templates"


@pytest.mark.parametrize("value", ["{{input.missing}}", "x {{steps.find.output.datasets.5.id}}",
                                   "{{steps.other.output}}", "{{input.q.deeper}}"])
def test_missing_values_are_refused(value: str) -> None:
    with pytest.raises(templates.MissingValue):
        templates.render(value, SCOPE)


def test_plan_check_names_each_missing_input() -> None:
    plan = [{"name": "a", "tool": "query", "input": {"sql": "{{input.sql}}", "limit": "{{input.n}}"}},
            {"name": "b", "tool": "memory_write", "input": {"key": "k", "value": "{{input.topic}}"}}]
    errors = templates.check_inputs(plan, {"n": 1})
    assert [e["field"] for e in errors] == ["input.sql", "input.topic"]
    assert templates.check_inputs(plan, {"n": 1, "sql": "SELECT 1", "topic": "t"}) == []


@pytest.mark.parametrize("text,action", [
    ('{"tool": "query", "input": {"sql": "SELECT 1"}}', {"tool": "query", "input": {"sql": "SELECT 1"}}),
    ('Sure. {"answer": "42"}', {"answer": "42"}),
    ("no json here", None), ('{"tool": 5}', None), ('{"tool": "q", "input": []}', None),
])
def test_model_actions_are_parsed_strictly(text: str, action: dict | None) -> None:
    assert parse_action(text) == action
