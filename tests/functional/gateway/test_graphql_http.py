"""GraphQL tooling works: the standard introspection queries (graphql-js ``getIntrospectionQuery()`` as
ported by graphql-core, with gql's options too) load the schema; nesting is priced, not capped by depth;
``Accept: application/graphql-response+json`` is honoured."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from graphql import build_client_schema, print_schema

from chalicelib.gateway.api import graphql_api
from tests.functional.conftest import Tenant, bearer
from tests.functional.gateway.data import World, build_world

FIXTURES = Path(__file__).with_name("fixtures")


@pytest.fixture
def world(tenant: Tenant) -> Iterator[World]:
    graphql_api.clear_cache()
    yield from build_world(tenant)


def _post(w: World, token: str, query: str, accept: str | None = None) -> tuple[int, dict, dict]:
    headers = {**bearer(token), "Content-Type": "application/json", **({"Accept": accept} if accept else {})}
    r = w.client.http.post("/graphql", headers=headers, body=json.dumps({"query": query}))
    return r.status_code, json.loads(r.body), r.headers


@pytest.mark.parametrize("fixture", ["introspection_query.graphql", "introspection_query_full.graphql"])
def test_standard_introspection_query_loads_the_schema(world: World, fixture: str) -> None:
    query = (FIXTURES / fixture).read_text()
    status, body, _ = _post(world, world.member.token, query)
    assert status == 200, body
    assert "errors" not in body, body
    client_schema = build_client_schema(body["data"])  # what GraphiQL and codegen do with the answer
    served = print_schema(client_schema)
    assert "type Dataset" in served
    assert "enum SyncStatus" in served
    assert client_schema.query_type.name == "Query"
    assert client_schema.mutation_type is not None


def test_introspection_is_priced_not_exempt(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    nest = "{ __schema { types { fields { type { fields { name } } } } } }"
    status, body, _ = _post(world, world.member.token, nest)
    assert status == 200
    assert "errors" not in body
    deeper = "{ __schema { types { fields { type { fields { type { fields { type { fields { name } } } } } } } } } }"
    status, body, _ = _post(world, world.member.token, deeper)  # graphql-core's own introspection depth rule
    assert status == 400
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    # the standard query costs about 12 000 here (lists by the schema's real sizes, a tenth per field)
    monkeypatch.setattr(graphql_api, "MAX_COST", 5_000)
    graphql_api.clear_cache()
    status, body, _ = _post(world, world.member.token, (FIXTURES / "introspection_query.graphql").read_text())
    assert status == 400, body
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "reason": "cost"}, body
    graphql_api.clear_cache()


def test_cost_not_depth_bounds_data_queries(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = "{ datasets(first: 1) { edges { node { source { lastSync { id status } } } } } }"
    status, body, _ = _post(world, world.member.token, deep)
    assert status == 200, body
    assert "errors" not in body, body
    monkeypatch.setattr(graphql_api, "MAX_COST", 3)  # the same query over a tiny budget: refused by cost
    graphql_api.clear_cache()
    status, body, _ = _post(world, world.member.token, deep)
    assert status == 400
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "reason": "cost"}
    graphql_api.clear_cache()


def test_aliases_still_limited(world: World) -> None:
    aliases = "{ " + " ".join(f"a{i}: __typename" for i in range(graphql_api.MAX_ALIASES + 1)) + " }"
    status, body, _ = _post(world, world.member.token, aliases)
    assert status == 400
    assert body["errors"][0]["extensions"]["reason"] == "aliases"


@pytest.mark.parametrize(("accept", "expected"), [
    ("application/graphql-response+json", "application/graphql-response+json"),
    ("application/graphql-response+json, application/json;q=0.9", "application/graphql-response+json"),
    ("application/json, application/graphql-response+json;q=0.5", "application/json"),
    ("application/graphql-response+json;q=0", "application/json"),
    (None, "application/json"),
    ("*/*", "application/json"),
])
def test_accept_graphql_response_json_is_honoured(world: World, accept: str | None, expected: str) -> None:
    status, body, headers = _post(world, world.member.token, "{ __typename }", accept)
    assert status == 200
    assert body == {"data": {"__typename": "Query"}}
    assert headers["Content-Type"] == expected
    assert headers["Vary"] == "Accept"
    status, body, headers = _post(world, world.member.token, "{ bogus }", accept)  # request errors too
    assert status == 400
    assert headers["Content-Type"] == expected
    assert body["errors"]
