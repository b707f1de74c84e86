"""AWS calls per request after quiet (the clock moved past every former time-to-live), and a change of each
piece of the request scope made in another container applying on the next request (docs/decisions.md,
"Request scope")."""
from __future__ import annotations

from typing import Any

import pytest
from chalice.test import Client

from chalicelib.agents.runtime import worker
from chalicelib.core import clock
from chalicelib.gateway import demo
from chalicelib.groups import create_app
from chalicelib.workers import jobs
from infra.local.workers import sqs_event
from tests.functional.agents.helpers import DEMO_PLAN_AGENT, create_agent, get_run, member, receive, start_run
from tests.functional.aws_calls import counting, route_calls
from tests.functional.chat import helpers as chat_helpers
from tests.functional.conftest import Tenant, bearer
from tests.functional.platform.helpers import call

QUIET = (0, 5, 60)  # seconds of quiet before the counted request: steady, past the former bounds, long
SQL = "SELECT city, count(*) AS n FROM customers GROUP BY city ORDER BY n DESC, city LIMIT 2"


def _chat(c: Client, token: str, question: str) -> Any:
    status, reply, _ = call(c, "POST", "/v1/chats", token, chat_helpers.ask(question))
    assert status == 201, reply
    return reply


def test_chat_round_trips_after_quiet(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    chat_helpers.use_providers(monkeypatch, None)
    world = chat_helpers.build(tenant)
    seen = {}
    with clock.frozen(), Client(create_app("platform")) as c:
        _chat(c, world.member.token, "How is travel booked?")
        for quiet in QUIET:
            clock.advance(quiet)
            with counting() as calls:
                _chat(c, world.member.token, "How many vacation days do employees get?")
            seen[quiet] = route_calls(calls)
    print("chat", {q: (sum(v.values()), dict(v)) for q, v in seen.items()})


def test_me_round_trips_after_quiet(tenant: Tenant) -> None:
    seen = {}
    with clock.frozen(), Client(create_app("platform")) as c:
        assert c.http.get("/v1/me", headers=bearer(tenant.token)).status_code == 200
        for quiet in QUIET:
            clock.advance(quiet)
            with counting() as calls:
                assert c.http.get("/v1/me", headers=bearer(tenant.token)).status_code == 200
            seen[quiet] = route_calls(calls)
    print("me", {q: (sum(v.values()), dict(v)) for q, v in seen.items()})


def test_agent_run_round_trips_after_quiet(tenant: Tenant) -> None:
    demo.seed(tenant.workspace_id, tenant.region, tenant.email, on_changed=jobs.index_changed_dataset)
    user = member(tenant.workspace_id)
    seen = {}
    with clock.frozen(), Client(create_app("platform")) as c:
        agent = create_agent(c, user.token, DEMO_PLAN_AGENT)
        for quiet in QUIET:
            run = start_run(c, user.token, agent["id"], {"topic": "customers", "sql": SQL})[1]
            msgs = receive(tenant.region)
            clock.advance(quiet)
            with counting() as calls:
                result = worker.handle(sqs_event(msgs, tenant.region, "arn:aws:sqs:us-east-1:000000000000:agent-runs"))
            assert result["batchItemFailures"] == []
            assert get_run(c, user.token, agent["id"], run["id"])["status"] == "completed"
            seen[quiet] = calls
    print("agent", {q: (sum(v.values()), dict(v)) for q, v in seen.items()})
