"""GraphQL front door: same answers as REST for every operation, the spec's types, refusals with
``extensions.code``, roles and workspace isolation."""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.core import clock
from chalicelib.gateway.api import graphql_api
from tests.functional.conftest import Tenant, bearer, make_tenant
from tests.functional.gateway.data import World, build_world, field, get, post, put_dataset
from tests.functional.gateway.sync_helpers import drain

FIELD = "name type nullable classification policy description"
DATASET = f"""id name owner freshness classification description lastSyncedAt rowCount
  source {{ id name kind category status }} schema {{ {FIELD} }} acl {{ type id }}"""


@pytest.fixture
def frozen_clock(stack: None) -> Iterator[None]:
    """REST and GraphQL answers are compared field by field, freshness included: no second may pass. (After
    the stack's set-up, which resets the clock: frozen before it, the clock ran again.)"""
    with clock.frozen():
        yield


@pytest.fixture
def world(tenant: Tenant) -> Iterator[World]:
    yield from build_world(tenant)


def gql(w: World, token: str | None, query: str, variables: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None) -> tuple[int, Any]:
    h = {"Content-Type": "application/json", **(bearer(token) if token else {}), **(headers or {})}
    r = w.client.http.post("/graphql", headers=h, body=json.dumps({"query": query, "variables": variables or {}}))
    return r.status_code, json.loads(r.body)


def data(w: World, token: str, query: str, variables: dict[str, Any] | None = None) -> Any:
    status, body = gql(w, token, query, variables)
    assert status == 200, body
    assert "errors" not in body, body
    return body["data"]


def rest_dataset(d: dict[str, Any]) -> dict[str, Any]:
    """The REST dataset in the GraphQL selection's shape (camelCase, the same fields)."""
    return {"id": d["id"], "name": d["name"], "owner": d["owner"], "freshness": d["freshness"],
            "classification": d["classification"], "description": d["description"],
            "lastSyncedAt": d["last_synced_at"], "rowCount": d["row_count"],
            "source": {k: d["source"][k] for k in ("id", "name", "kind", "category", "status")},
            "schema": d["schema"], "acl": [{"type": a["type"].upper(), "id": a["id"]} for a in d["acl"]]}


def test_graphql_and_rest_agree_on_every_operation(frozen_clock: None, world: World) -> None:
    tok, admin = world.member.token, world.tenant.token
    # connectors
    g = data(world, tok, "{ connectors { id name kind category status health { lastCheckedAt lastError } createdAt } }")
    r = get(world, "/v1/connectors", tok)[1]["connectors"]
    assert g["connectors"] == [{"id": c["id"], "name": c["name"], "kind": c["kind"], "category": c["category"],
                                "status": c["status"], "health": {"lastCheckedAt": c["health"]["last_checked_at"],
                                                                  "lastError": c["health"]["last_error"]},
                                "createdAt": c["created_at"]} for c in r]
    assert data(world, tok, "{ connectors(category: API) { id } }")["connectors"] == []
    # datasets, page by page, with search and owner
    q = f"""query($after: String) {{ datasets(first: 1, after: $after) {{ totalCount
          pageInfo {{ hasNextPage hasPreviousPage endCursor }} edges {{ cursor node {{ {DATASET} }} }} }} }}"""
    p1 = data(world, tok, q)["datasets"]
    r1 = get(world, "/v1/catalog/datasets?limit=1", tok)[1]
    assert p1["totalCount"] == r1["total_count"] == 2
    assert [e["node"] for e in p1["edges"]] == [rest_dataset(d) for d in r1["items"]]
    assert p1["pageInfo"]["hasNextPage"] is r1["has_more"] is True
    assert p1["pageInfo"]["endCursor"] == r1["next_cursor"]
    p2 = data(world, tok, q, {"after": p1["pageInfo"]["endCursor"]})["datasets"]
    r2 = get(world, f"/v1/catalog/datasets?limit=1&after={r1['next_cursor']}", tok)[1]
    assert [e["node"] for e in p2["edges"]] == [rest_dataset(d) for d in r2["items"]]
    assert p2["pageInfo"]["hasNextPage"] is False
    assert p2["pageInfo"]["hasPreviousPage"] is True
    g = data(world, tok, '{ datasets(search: "crm", owner: "crm-team@example.com") { totalCount edges { node { id } } } }')
    r = get(world, "/v1/catalog/datasets?q=crm&owner=crm-team@example.com", tok)[1]
    assert [e["node"]["id"] for e in g["datasets"]["edges"]] == [d["id"] for d in r["items"]] == [world.customers]
    # dataset + schema
    g = data(world, tok, f'query($id: ID!) {{ dataset(id: $id) {{ {DATASET} }} }}', {"id": world.customers})["dataset"]
    assert g == rest_dataset(get(world, f"/v1/catalog/datasets/{world.customers}", tok)[1])
    assert g["schema"] == get(world, f"/v1/catalog/datasets/{world.customers}/schema", tok)[1]["fields"]
    # lineage
    post(world, "/v1/query", tok, {"sql": "SELECT count(*) FROM customers", "answer": {"type": "AGENT_RUN", "id": "run_x"}})
    drain(world.tenant.region)  # the query's lineage, written by the worker from its message
    g = data(world, tok, 'query($id: ID!) { lineage(datasetId: $id, depth: 2) { root depth truncated '
                         'nodes { id type name hop } edges { source target createdAt } } }', {"id": world.customers})
    r = get(world, f"/v1/lineage/{world.customers}?depth=2", tok)[1]
    assert g["lineage"]["nodes"] == r["nodes"]
    assert g["lineage"]["truncated"] == r["truncated"]
    assert g["lineage"]["edges"] == [{"source": e["source"], "target": e["target"], "createdAt": e["created_at"]}
                                     for e in r["edges"]]
    assert "run_x" in {n["id"] for n in r["nodes"]}
    # policies
    g = data(world, tok, "{ policies { id scope datasetId datasetName field classification policy "
                         "principals { type id } residency region replication description } }")["policies"]
    r = get(world, "/v1/policies", tok)[1]["policies"]
    assert [(p["id"], p["scope"], p["datasetId"], p["field"], p["policy"], p["region"]) for p in g] == [
        (p["id"], p["scope"], p["dataset_id"], p["field"], p["policy"], p["region"]) for p in r]
    assert data(world, tok, "{ policies(scope: RESIDENCY) { residency region replication } }")["policies"] == [
        {"residency": "us-east", "region": "us-east-1", "replication": "in-region-multi-az"}]
    # syncConnector vs POST /v1/connectors/{id}/sync: one Idempotency-Key, one run, both doors
    status, rest_run = post(world, f"/v1/connectors/{world.connector}/sync", admin, {"mode": "FULL_REFRESH"})
    status, body = gql(world, admin, 'mutation($id: ID!) { syncConnector(id: $id, mode: FULL_REFRESH) '
                                     '{ id connectorId mode status queuedAt rowsRead rowsWritten error } }',
                       {"id": world.connector}, headers={"Idempotency-Key": "k-1"})
    assert status == 200, body
    assert "errors" not in body, body
    run = body["data"]["syncConnector"]
    assert run["connectorId"] == rest_run["connector_id"]
    assert run["mode"] == rest_run["mode"] == "FULL_REFRESH"
    assert run["status"] == rest_run["status"] == "QUEUED"
    assert run["id"] != rest_run["id"]
    replay = gql(world, admin, f'mutation {{ syncConnector(id: "{world.connector}", mode: FULL_REFRESH) {{ id }} }}',
                 headers={"Idempotency-Key": "k-1"})[1]
    assert replay["data"]["syncConnector"]["id"] == run["id"]
    r = world.client.http.post(f"/v1/connectors/{world.connector}/sync", body=json.dumps({"mode": "FULL_REFRESH"}),
                               headers={**bearer(admin), "Content-Type": "application/json", "Idempotency-Key": "k-1"})
    assert json.loads(r.body)["id"] == run["id"]
    # setFieldPolicy vs PUT .../fields/{field}/policy
    g = data(world, admin, f'mutation {{ setFieldPolicy(datasetId: "{world.customers}", field: "phone", policy: MASK) '
                           f'{{ {FIELD} }} }}')["setFieldPolicy"]
    r = post(world, f"/v1/catalog/datasets/{world.customers}/fields/country/policy", admin, {"policy": "HASH"}, "PUT")[1]
    assert g["policy"] == "MASK"
    assert r["policy"] == "HASH"
    assert set(g) == set(r)
    fields = {f["name"]: f for f in get(world, f"/v1/catalog/datasets/{world.customers}/schema", tok)[1]["fields"]}
    assert fields["phone"] == g
    assert fields["country"] == r


def test_invisible_datasets_stay_invisible_in_graphql(world: World) -> None:
    tok = world.member.token
    g = data(world, tok, "{ datasets(first: 100) { totalCount edges { node { name } } } }")["datasets"]
    assert g["totalCount"] == 2
    assert "payroll" not in json.dumps(g)
    assert data(world, tok, f'{{ dataset(id: "{world.payroll}") {{ id }} }}') == {"dataset": None}
    other = make_tenant("other@example.com", name="Other")
    foreign = put_dataset(other.workspace_id, other.region, "foreign", [field("x")], [("y",)])
    assert data(world, world.tenant.token, f'{{ dataset(id: "{foreign}") {{ id }} }}') == {"dataset": None}
    status, body = gql(world, tok, f'{{ lineage(datasetId: "{world.payroll}") {{ truncated }} }}')
    assert body["data"] is None
    assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    ssn = data(world, tok, f'{{ dataset(id: "{world.customers}") {{ schema {{ name }} }} }}')["dataset"]["schema"]
    assert "ssn" not in {f["name"] for f in ssn}


def test_roles_and_authentication_in_graphql(world: World) -> None:
    status, body = gql(world, None, "{ datasets { totalCount } }")
    assert status == 401
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    status, body = gql(world, "garbage", "{ datasets { totalCount } }")
    assert status == 401
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    status, body = gql(world, world.viewer.token, "{ datasets { totalCount } }")
    assert status == 200
    assert body["data"] is None
    assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    status, body = gql(world, world.member.token, f'mutation {{ setFieldPolicy(datasetId: "{world.customers}", '
                                                  f'field: "email", policy: ALLOW) {{ policy }} }}')
    assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    status, body = gql(world, world.member.token, f'mutation {{ syncConnector(id: "{world.connector}") {{ id }} }}')
    assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    schema = get(world, f"/v1/catalog/datasets/{world.customers}/schema", world.member.token)[1]["fields"]
    assert {f["name"]: f["policy"] for f in schema}["email"] == "MASK"  # nothing changed


def test_bad_documents_are_refused_with_codes(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    tok = world.member.token
    cases = {
        "syntax": "{ datasets { totalCount }",
        "validation": "{ datasets { bogus } }",
    }
    for reason, q in cases.items():
        status, body = gql(world, tok, q)
        assert status == 400, body
        assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "reason": reason}, body
    status, body = gql(world, tok, '{ lineage(datasetId: "x", depth: "three") { truncated } }')
    assert status == 400
    assert "Int cannot represent" in body["errors"][0]["message"]
    status, body = gql(world, tok, "query($d: Int) { lineage(datasetId: \"x\", depth: $d) { truncated } }", {"d": "x"})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    status, body = gql(world, tok, f'{{ lineage(datasetId: "{world.customers}", depth: 11) {{ truncated }} }}')
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert "between 1 and 10" in body["errors"][0]["message"]
    deep = "{ __schema { types { fields { type { fields { type { fields { type { fields { type { fields { type { name } } } } } } } } } } } } }"
    status, body = gql(world, tok, deep)  # graphql-core's own introspection depth rule
    assert status == 400
    assert body["errors"][0]["message"] == "Maximum introspection depth exceeded"
    # no plain depth limit: nesting is priced (tests/functional/gateway/test_graphql_http.py)
    graphql_api.clear_cache()
    aliases = "{ " + " ".join(f"a{i}: datasets(first: 1) {{ totalCount }}" for i in range(16)) + " }"
    status, body = gql(world, tok, aliases)
    assert status == 400
    assert body["errors"][0]["extensions"]["reason"] == "aliases"
    costly = "{ " + " ".join(f"a{i}: datasets(first: 100) {{ edges {{ node {{ schema {{ {FIELD} }} acl {{ id }} }} }} }}"
                             for i in range(3)) + " }"
    status, body = gql(world, tok, costly)
    assert status == 400
    assert body["errors"][0]["extensions"]["reason"] == "cost"
    r = world.client.http.post("/graphql", headers={**bearer(tok), "Content-Type": "application/json"}, body="{nope")
    assert r.status_code == 400
    assert json.loads(r.body)["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    r = world.client.http.post("/graphql", headers={**bearer(tok), "Content-Type": "application/json"},
                               body=json.dumps({"query": "{ policies { id } }", "variables": [1]}))
    assert r.status_code == 400


def test_documents_are_cached_and_refusals_too(world: World) -> None:
    graphql_api.clear_cache()
    q = "{ datasets { totalCount } }"
    for _ in range(3):
        data(world, world.member.token, q)
    gql(world, world.member.token, "{ bogus }")
    gql(world, world.member.token, "{ bogus }")
    assert list(graphql_api._docs) == [q, "{ bogus }"]


def test_schema_is_served_and_matches_the_spec_types(world: World) -> None:
    sdl = graphql_api.SDL_PATH.read_text()
    for path in ("/graphql?sdl", "/graphql/schema"):
        r = world.client.http.get(path)
        assert r.status_code == 200
        assert r.body.decode() == sdl
    t = data(world, world.member.token, """{ __type(name: "Dataset") { fields { name type { kind name ofType {
        kind name ofType { kind name ofType { kind name } } } } } } }""")["__type"]["fields"]

    def sig(tp: dict[str, Any]) -> str:
        if tp["kind"] == "NON_NULL":
            return sig(tp["ofType"]) + "!"
        if tp["kind"] == "LIST":
            return "[" + sig(tp["ofType"]) + "]"
        return tp["name"]

    got = {f["name"]: sig(f["type"]) for f in t}
    assert {k: got[k] for k in ("id", "name", "source", "owner", "freshness", "classification", "schema", "acl")} == {
        "id": "ID!", "name": "String!", "source": "Connector!", "owner": "String!", "freshness": "Duration!",
        "classification": "Classification!", "schema": "[Field!]!", "acl": "[Principal!]!"}
    q = data(world, world.member.token, '{ __type(name: "Query") { fields { name args { name defaultValue } } } }')
    args = {f["name"]: {a["name"]: a["defaultValue"] for a in f["args"]} for f in q["__type"]["fields"]}
    assert args["datasets"]["first"] == "25"
    assert args["lineage"]["depth"] == "3"
    enums = data(world, world.member.token, '{ a: __type(name: "FieldPolicy") { enumValues { name } } '
                                            'b: __type(name: "PolicyScope") { enumValues { name } } }')
    assert [v["name"] for v in enums["a"]["enumValues"]] == ["ALLOW", "MASK", "HASH", "REDACT", "DENY"]
    assert [v["name"] for v in enums["b"]["enumValues"]] == ["ACL", "PII", "RESIDENCY"]
