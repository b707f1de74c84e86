"""OpenLineage run events: START then COMPLETE (same runId) for a chat answer and a query, with the datasets
read as inputs and the facet naming their masked columns, each event checked against the spec's shape as
openlineage-python builds it; a region's events only to that region's endpoint (an EU workspace's never to
the US one); nothing sent without an endpoint; an endpoint that is down fails nothing."""
from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core.config import settings
from chalicelib.core.telemetry import openlineage
from chalicelib.gateway.catalog import lineage_events
from chalicelib.groups import create_app
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.gateway.sync_helpers import drain
from tests.local_http import PeerServer

QUESTION = "How many vacation days do employees get per year?"
SPEC_EVENT_TYPES = {"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"}


class Collector:
    """A loopback OpenLineage endpoint that keeps what it is sent."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        received = self.events

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(201)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = PeerServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v1/lineage"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def us() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


@pytest.fixture
def eu() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


def check_spec_shape(event: dict[str, Any]) -> None:
    """The RunEvent's required fields and formats (OpenLineage 2-0-2), and every facet's ``_producer`` and
    ``_schemaURL``."""
    assert {"eventTime", "producer", "run", "job", "schemaURL"} <= set(event)
    assert event["eventType"] in SPEC_EVENT_TYPES
    assert event["schemaURL"].startswith("https://openlineage.io/spec/")
    datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00"))
    uuid.UUID(event["run"]["runId"])
    assert event["job"]["namespace"] and event["job"]["name"]
    facets = [*event["run"].get("facets", {}).values(), *event["job"].get("facets", {}).values()]
    for ds in event.get("inputs", []) + event.get("outputs", []):
        assert ds["namespace"] and ds["name"]
        facets += ds.get("facets", {}).values()
    for facet in facets:
        assert facet["_producer"].startswith("https://") and facet["_schemaURL"].startswith("https://")


def runs(events: list[dict[str, Any]], job: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in events:
        if e["job"]["name"] == job:
            out.setdefault(e["run"]["runId"], []).append(e["eventType"])
    return out


def test_a_chat_answer_and_its_query_are_runs_on_their_regions_endpoint(
        tenant: Tenant, monkeypatch: pytest.MonkeyPatch, us: Collector, eu: Collector) -> None:
    helpers.use_providers(monkeypatch, None)
    world = helpers.build(tenant)
    monkeypatch.setenv("OPENLINEAGE_URL", us.url)
    monkeypatch.setenv("OPENLINEAGE_URL_EU_CENTRAL_1", eu.url)
    settings.cache_clear()  # settings are read once from the environment
    with helpers.client() as c:
        assert post(c, "/v1/chats", world.member.token, ask(QUESTION)).status_code == 201
    with Client(create_app("gateway")) as c:
        r = post(c, "/v1/query", world.member.token, {"sql": "SELECT name, city FROM people"})
        assert r.status_code == 200, r.body
    drain(tenant.region)  # the query's lineage message: its run is emitted where the worker writes it
    openlineage.drain()
    assert eu.events == []
    for event in us.events:
        check_spec_shape(event)
        assert event["job"]["namespace"] == f"aiplat://us-east-1/{tenant.workspace_id}"
    (answer_run,) = runs(us.events, "chat_answer").values()
    assert answer_run == ["START", "COMPLETE"]
    (query_run,) = runs(us.events, "query").values()
    assert query_run == ["START", "COMPLETE"]
    query = next(e for e in us.events if e["job"]["name"] == "query")
    (people,) = query["inputs"]
    assert people["name"] == f"dataset/{world.people}"
    assert people["facets"][openlineage.MASKED_FACET]["columns"] == ["email"]
    assert helpers.MASKED_EMAIL not in json.dumps(us.events)


def test_an_eu_workspace_never_sends_to_the_us_endpoint(monkeypatch: pytest.MonkeyPatch, stack: None,
                                                         us: Collector, eu: Collector) -> None:
    helpers.use_providers(monkeypatch, None)
    tenant = make_tenant("eu@example.com", residency="eu-central", name="Beta EU")
    world = helpers.build(tenant)
    monkeypatch.setenv("OPENLINEAGE_URL", us.url)  # the global (US) region's endpoint only
    settings.cache_clear()  # settings are read once from the environment
    with helpers.client() as c:
        assert post(c, "/v1/chats", world.member.token, ask(QUESTION)).status_code == 201
    openlineage.drain()
    assert us.events == [] and eu.events == []
    monkeypatch.setenv("OPENLINEAGE_URL_EU_CENTRAL_1", eu.url)
    settings.cache_clear()  # settings are read once from the environment
    with helpers.client() as c:
        assert post(c, "/v1/chats", world.member.token, ask(QUESTION)).status_code == 201
    openlineage.drain()
    assert us.events == []
    assert eu.events and all(e["job"]["namespace"] == f"aiplat://eu-central-1/{tenant.workspace_id}"
                             for e in eu.events)


def test_a_failed_run_is_a_fail_event_with_its_error(tenant: Tenant, monkeypatch: pytest.MonkeyPatch,
                                                     us: Collector) -> None:
    monkeypatch.setenv("OPENLINEAGE_URL", us.url)
    settings.cache_clear()  # settings are read once from the environment
    lineage_events.from_edges(tenant.region, tenant.workspace_id, [("dataset", "ds_1", "agent_run", "run_1", {"status": "failed"})])
    openlineage.drain()
    assert [e["eventType"] for e in us.events] == ["START", "FAIL"]
    check_spec_shape(us.events[1])
    assert us.events[1]["run"]["facets"]["errorMessage"]["message"] == "the run ended failed"


def test_an_endpoint_that_is_down_fails_nothing(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.use_providers(monkeypatch, None)
    world = helpers.build(tenant)
    down = Collector()
    down.close()  # the port refuses connections now
    monkeypatch.setenv("OPENLINEAGE_URL", down.url)
    settings.cache_clear()  # settings are read once from the environment
    with helpers.client() as c:
        assert post(c, "/v1/chats", world.member.token, ask(QUESTION)).status_code == 201
    openlineage.drain()


def test_nothing_is_built_without_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in __import__("os").environ if n.startswith("OPENLINEAGE_URL")]:
        monkeypatch.delenv(name)
        settings.cache_clear()  # settings are read once from the environment
    assert not openlineage.configured()
    assert openlineage.endpoint_for("us-east-1") is None
