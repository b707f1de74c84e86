"""The demo agent ``make run`` seeds in the demo workspace: a declared plan over the demo datasets
(``gateway/demo.py``) that answers a question about customers and orders. Idempotent by name."""
from __future__ import annotations

from typing import Any

from chalicelib.agents import definitions, models
from chalicelib.core.authz import Principal
from chalicelib.core.tenancy import workspace_scope

DEMO_AGENT_NAME = "Demo order analyst"
DEMO_AGENT: dict[str, Any] = {
    "name": DEMO_AGENT_NAME,
    "instructions": "Answer questions about the demo customers and their orders from the catalog and a query.",
    "model": "auto",
    "tools": ["catalog_search", "dataset_schema", "query", "memory_read", "memory_write"],
    "plan": [
        {"name": "find", "tool": "catalog_search", "input": {"query": "orders"}},
        {"name": "schema", "tool": "dataset_schema", "input": {"dataset": "orders"}},
        {"name": "revenue", "tool": "query", "input": {
            "sql": "SELECT c.country, count(*) AS orders, round(sum(o.amount), 2) AS revenue "
                   "FROM orders o JOIN customers c USING (customer_id) WHERE o.status = 'paid' "
                   "GROUP BY c.country ORDER BY revenue DESC", "limit": 10}},
        {"name": "remember", "tool": "memory_write", "input": {"key": "last_question", "value": "{{input.question}}"}},
    ],
    "limits": {"max_steps": 6, "deadline": "PT5M", "max_tokens": 2000},
}


def seed(workspace_id: str, region: str, user_id: str, email: str) -> dict[str, Any]:
    """Create the demo agent unless it exists; returns ``{"agent_id"}``."""
    for item in models.agents(region).query(workspace_id):
        if item.name == DEMO_AGENT_NAME:
            return {"agent_id": item.id}
    principal = Principal(user_id=user_id, workspace_id=workspace_id, roles=("admin",), email=email, amr=("seed",),
                          token_id="seed")
    return {"agent_id": definitions.create(workspace_scope(workspace_id, principal), dict(DEMO_AGENT))["id"]}
